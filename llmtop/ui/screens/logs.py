"""The log view (``L`` on an engine): its log, following, searchable, beside the numbers.

- ``LogScreen``: one target's kept log events (``Snapshot.log_events``), newest at the
  bottom, following; ``/`` search (``n``/``N``), ``e`` errors-only, ``t`` jump to a moment,
  ``End``/``G`` follow again, ``Esc``/``q`` back. Opened on a request (requests screen),
  only the lines that name that request.
- ``log_events``: the one accessor of the snapshot's events; ``mark_log_seen``: tells the
  store the operator read the log, so the overview's mark clears.
- ``log_section``: the engine detail's lines about its log; ``error_marks``: the
  sparklines' strip of log errors at their time.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import islice
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Static

from llmtop import units
from llmtop.model import EngineRow, Snapshot
from llmtop.model.logs import SEVERITIES, LogEvent, LogSummary, severity_at_least
from llmtop.ui import fmt
from llmtop.ui.fmt import S
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter
from llmtop.ui.widgets.logview import LogLines, event_lines

__all__ = ["FLOORS", "NO_LOG_HINT", "LogScreen", "error_marks", "has_logs", "log_events",
           "log_section", "mark_log_seen", "matches_request", "summary_of"]

FLOORS: tuple[str | None, ...] = (None, "warning", "error")
"""What ``e`` steps through: every event, warnings and worse, errors and worse."""

_FLOOR_WORDS = {None: "all", "warning": "warnings+", "error": "errors only"}

NO_LOG_HINT = ("no log is followed for this engine: llmtop finds a local engine's log from "
               "its process, container or pod; for another, set log = PATH for the target "
               "in the config file or pass --log TARGET=PATH")
"""What the view says for an engine whose row has no log summary."""

TIME_PROMPT = "Jump to a time: HH:MM[:SS] or an offset (-5m, -90s); Enter to go"


def log_events(snapshot: Snapshot | None, target: str) -> Sequence[LogEvent]:
    """``target``'s kept log events, oldest first (empty when none are kept)."""
    if snapshot is None:
        return ()
    return snapshot.log_events.get(target, ())


def has_logs(snapshot: Snapshot | None) -> bool:
    """Whether any engine's log is followed (a row carries a log summary): ``L`` works."""
    return snapshot is not None and any(r.log is not None for r in snapshot.engines)


def summary_of(snapshot: Snapshot | None, target: str) -> LogSummary | None:
    """The log summary of ``target``'s first row, or None."""
    if snapshot is None:
        return None
    return next((r.log for r in snapshot.engines if r.target == target and r.log), None)


def mark_log_seen(view: LiveView, target: str, t: float) -> bool:
    """Tell the store the operator has read ``target``'s log up to ``t`` (its
    ``seen(target, t)``), so the overview's new-errors mark clears. A source without a store
    (fleet mode, the UI's fake sources) is left alone: False."""
    store = getattr(view.source, "store", None)
    seen = getattr(store, "seen", None)
    if not callable(seen):
        return False
    seen(target, t)
    return True


def matches_request(ev: LogEvent, request_id: str) -> bool:
    """Whether ``ev`` names ``request_id``: its parsed id, or the id in its text."""
    return ev.request_id == request_id or any(request_id in line for line in event_lines(ev))


def error_marks(events: Sequence[LogEvent], times: Sequence[float], interval_s: float
                ) -> tuple[list[float | None], int]:
    """The sparklines' log strip: per sample (``times``, commit wall times, oldest first)
    1.0 where an error or critical event falls in that sample's interval, None elsewhere
    (drawn blank); events after the newest sample count in it. And how many error events
    the samples cover."""
    out: list[float | None] = [None] * len(times)
    if not times:
        return out, 0
    first = times[0] - max(interval_s, 0.0)
    n = 0
    for ev in events:
        if ev.t_wall <= first or not severity_at_least(ev.severity, "error"):
            continue
        i = min(bisect.bisect_left(times, ev.t_wall), len(times) - 1)
        out[i] = 1.0
        n += 1
    return out, n


def _counts(summary: LogSummary) -> str:
    """``2 error · 5 warning`` in the window (the worst first); "" when none."""
    parts = [f"{summary.counts[s]} {s}" for s in reversed(SEVERITIES)
             if summary.counts.get(s) and s != "info" and s != "debug"]
    return " \u00b7 ".join(parts)


def log_section(row: EngineRow) -> list[Text]:
    """The engine detail's lines about its log: its source (or why it cannot be read), the
    window's counts, new errors, the last error with its time; none without a summary."""
    log = row.log
    if log is None:
        return []
    loc = log.location
    head = Text("Log: ", style="bold")
    if loc is None or loc.error:
        why = loc.error if loc is not None and loc.error else "not found"
        head.append(f"cannot be read: {why}", style=S("gauge-warn"))
    else:
        head.append(loc.label)
        counts = _counts(log)
        head.append(f"  {counts} in the window" if counts else "  no warning or error in the "
                    "window", style="dim")
    if log.new_errors:
        head.append(f"  {log.new_errors} new", style=S("gauge-crit bold"))
    out = [head]
    if log.last_error is not None:
        ev = log.last_error
        line = Text(f"  last error {fmt.clock(ev.t_wall)}  ", style=S("gauge-crit"))
        if ev.headline and ev.headline in (row.error or ""):  # the state's reason says it
            line.append("(the line in the state above)", style="dim")
        else:
            line.append(ev.headline, style=S("gauge-crit bold"))
        out.append(line)
    if log.dropped:
        out.append(Text(f"  {log.dropped} events dropped (over the kept bound)", style="dim"))
    out.append(Text("  L: the log (/ search, e errors only, t jump to a time)", style="dim"))
    return out


class LogScreen(Screen):
    """One target's log (``view.snapshot``'s events), following; see the module doc."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="close the search box, else go back",
                id="log_back"),
        Binding("q", "back", "Back", show=False, id="log_back_q"),
        Binding("slash", "search", "Search", key_display="/", id="log_search"),
        Binding("n", "step_match(1)", "Next", tooltip="the next match (newer)", id="log_next"),
        Binding("N", "step_match(-1)", "Previous", tooltip="the previous match (older)",
                show=False, id="log_prev"),
        Binding("e", "floor", "Errors", tooltip="all, warnings and worse, errors and worse",
                id="log_errors"),
        Binding("t", "jump_time", "Time", tooltip="jump to a time: 03:12, -5m", id="log_time"),
        Binding("G,end", "follow", "Follow", tooltip="to the newest, following again",
                id="log_follow"),
        Binding("g,home", "oldest", "Oldest", show=False, id="log_oldest"),
        Binding("k,up", "rows(-1)", "Up", show=False, id="log_up"),
        Binding("j,down", "rows(1)", "Down", show=False, id="log_down"),
        Binding("pageup,b", "pages(-1)", "Page up", show=False, id="log_page_up"),
        Binding("pagedown,f", "pages(1)", "Page down", show=False, id="log_page_down"),
    ]

    DEFAULT_CSS = """
    LogScreen #log-source { height: auto; max-height: 3; padding: 0 1; }
    LogScreen #log-state { height: 1; padding: 0 1; background: $surface;
                           text-wrap: nowrap; text-overflow: ellipsis; }
    LogScreen .log-box { dock: bottom; display: none; margin-bottom: 1; height: 3; }
    LogScreen .log-box.-open { display: block; }
    """

    def __init__(self, view: LiveView, target: str, *, request_id: str | None = None,
                 at: float | None = None) -> None:
        super().__init__()
        self.view = view
        self.target = target
        self.request_id = request_id
        """Only the events that name this request (opened from the requests screen)."""
        self.at = at
        """A time to open at (a moment picked elsewhere); None: the newest, following."""
        self.floor: str | None = None
        self._shown_key: tuple[Any, ...] | None = None
        self._seen_t = float("-inf")
        """The newest time the store was told this log was read up to."""

    def compose(self) -> ComposeResult:
        yield Static(self._title(), classes="title", id="log-title")
        yield Static(id="log-source")
        yield Static(id="log-state")
        yield LogLines(id="log-lines")
        yield Input(placeholder="search (Enter: to the newest match; n/N next/previous)",
                    id="log-search", classes="log-box")
        yield Input(placeholder=TIME_PROMPT, id="log-time", classes="log-box")
        yield FitFooter()

    def _title(self) -> str:
        name = fmt.compact_target(self.target)
        if self.request_id:
            return f"Log \u00b7 {name} \u00b7 request {self.request_id}"
        return f"Log \u00b7 {name}"

    @property
    def lines(self) -> LogLines:
        return self.query_one(LogLines)

    def on_mount(self) -> None:
        self.refresh_data(force=True)
        if self.at is not None:
            self.lines.jump_to_time(self.at)
            self._show_state()
        self.lines.focus()

    # -- data ---------------------------------------------------------------------------------
    def shown_events(self) -> list[LogEvent]:
        """The kept events after the errors-only floor and the request filter."""
        evs: Sequence[LogEvent] = log_events(self.view.snapshot, self.target)
        floor, rid = self.floor, self.request_id
        return [ev for ev in evs if (floor is None or severity_at_least(ev.severity, floor))
                and (rid is None or matches_request(ev, rid))]

    def refresh_data(self, *, force: bool = False) -> None:
        snap = self.view.snapshot
        raw = log_events(snap, self.target)
        key = (id(raw), len(raw), id(raw[0]) if raw else 0, id(raw[-1]) if raw else 0,
               self.floor)
        if force or key != self._shown_key:
            self._shown_key = key
            lines = self.lines
            lines.empty_text = self._empty_text()
            lines.set_events(self.shown_events())
        self._show_source()
        self._show_state()
        if self.request_id is None and raw and self.app.screen is self:
            newest = max(ev.t_wall for ev in islice(reversed(raw), 50))  # a deque too
            t = max(newest, snap.time if snap else 0.0)
            if t > self._seen_t:  # told once per newer time: the store redoes its rows
                self._seen_t = t
                mark_log_seen(self.view, self.target, t)

    def _empty_text(self) -> Text:
        summary = summary_of(self.view.snapshot, self.target)
        if summary is None:
            return Text(NO_LOG_HINT, style="dim")
        if summary.location is not None and summary.location.error:
            return Text(f"cannot read this log: {summary.location.error}",
                        style=S("gauge-warn"))
        if self.request_id:
            return Text(f"no log line names request {self.request_id} (vLLM logs request ids "
                        "with --enable-log-requests)", style="dim")
        if self.floor is not None and log_events(self.view.snapshot, self.target):
            return Text(f"no event at {self.floor} or worse among the kept ones (e: all)",
                        style="dim")
        return Text("no log events yet", style="dim")

    def _show_source(self) -> None:
        """The log's source, or why it cannot be read; the window's counts; drops."""
        summary = summary_of(self.view.snapshot, self.target)
        t = Text()
        if summary is None:
            t.append("no log followed", style=S("gauge-warn"))
        elif summary.location is None or summary.location.error:
            loc = summary.location
            t.append("cannot read: " + (loc.error if loc is not None and loc.error
                                        else "no log found"), style=S("gauge-warn"))
        else:
            t.append(summary.location.label, style="bold")
            counts = _counts(summary)
            if counts:
                t.append(f"  {counts} in {units.window(self.view.snapshot.window_s)}"
                         if self.view.snapshot else f"  {counts}", style=S("gauge-crit"))
        if summary is not None and summary.dropped:
            t.append(f"  {summary.dropped} dropped", style=S("gauge-warn"))
        box = self.query_one("#log-source", Static)
        box.update(t)

    def _show_state(self) -> None:
        """Following or paused (where), the filter, the search."""
        lines = self.lines
        t = Text(no_wrap=True, overflow="ellipsis")
        if lines.following:
            t.append("FOLLOWING", style=S("gauge-ok bold"))
        else:
            t.append("PAUSED", style=S("gauge-warn bold"))
            if lines.rows and lines.top < len(lines.rows):
                ev = lines.events[lines.rows[lines.top][0]]
                t.append(f" at {fmt.clock(ev.t_wall)}")
            t.append(" \u00b7 End/G follows", style="dim")
        t.append(f" \u00b7 {_FLOOR_WORDS[self.floor]}",
                 style=S("gauge-warn") if self.floor else "dim")
        n = len(lines.events)
        t.append(f" \u00b7 {n} event{'' if n == 1 else 's'}", style="dim")
        if lines.needle:
            if lines.matches:
                at = "" if lines.current is None else f"{lines.current + 1} of "
                t.append(f" \u00b7 /{lines.needle} {at}{len(lines.matches)}")
            else:
                t.append(f" \u00b7 /{lines.needle} no match", style=S("gauge-warn"))
        self.query_one("#log-state", Static).update(t)

    # -- keys ---------------------------------------------------------------------------------
    def action_back(self) -> None:
        opened = [box for box in self.query(".log-box").results(Input)
                  if box.has_class("-open")]
        if opened:
            for box in opened:
                box.remove_class("-open")
            self.lines.focus()
            return
        self.app.pop_screen()

    def action_rows(self, n: int) -> None:
        self.lines.scroll_rows(n)
        self._show_state()

    def action_pages(self, n: int) -> None:
        self.lines.page(n)
        self._show_state()

    def action_follow(self) -> None:
        self.lines.follow()
        self._show_state()

    def action_oldest(self) -> None:
        self.lines.move_to(0)
        self._show_state()

    def action_floor(self) -> None:
        self.floor = FLOORS[(FLOORS.index(self.floor) + 1) % len(FLOORS)]
        self.refresh_data(force=True)

    def action_search(self) -> None:
        box = self.query_one("#log-search", Input)
        box.value = self.lines.needle
        box.add_class("-open")
        box.focus()

    @on(Input.Changed, "#log-search")
    def _search_changed(self, event: Input.Changed) -> None:
        self.lines.set_needle(event.value)
        self._show_state()

    @on(Input.Submitted, "#log-search")
    def _search_done(self) -> None:
        self.query_one("#log-search", Input).remove_class("-open")
        self.lines.focus()
        self.action_step_match(-1)

    def action_step_match(self, direction: int) -> None:
        if self.lines.needle and not self.lines.step_match(direction):
            self.notify(f"no match for {self.lines.needle!r}", timeout=2)
        self._show_state()

    def action_jump_time(self) -> None:
        box = self.query_one("#log-time", Input)
        box.value = ""
        box.add_class("-open")
        box.focus()

    @on(Input.Submitted, "#log-time")
    def _jump(self, event: Input.Submitted) -> None:
        event.input.remove_class("-open")
        self.lines.focus()
        err = self.jump_to(event.value) if event.value.strip() else None
        if err:
            self.notify(err, severity="error")

    def jump_to(self, text: str) -> str | None:
        """Show the log from ``text`` (``03:12``, ``03:12:04``, ``-5m``, RFC 3339); an error
        line, or None."""
        from llmtop.errors import ConfigError
        from llmtop.fleet.config import parse_time

        snap = self.view.snapshot
        now = snap.time if snap is not None else self.view.clock()
        try:
            at = parse_time(text, now=now)
        except ConfigError as exc:
            return str(exc).replace("--at: ", "")
        if not self.lines.jump_to_time(at):
            return "no log events to jump in"
        self._show_state()
        return None
