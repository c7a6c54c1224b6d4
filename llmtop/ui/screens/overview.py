"""The overview: header + verdict, engines table, GPU lines, sparklines, event log."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from rich.align import Align
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Input, Static

from llmtop import units
from llmtop.targets import NO_TARGETS_HINTS
from llmtop.ui import fmt
from llmtop.ui.compositor import use_crop_compositor
from llmtop.ui.groups import (
    Groups,
    RowKind,
    fold_key,
    model_groups,
    stack_groups,
)
from llmtop.ui.screens.logs import error_marks, log_events
from llmtop.ui.source import SPARK_FIELDS, Source, row_value
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.engines import COLUMNS, WIDE_MIN_WIDTH, EnginesTable
from llmtop.ui.widgets.footer import FitFooter
from llmtop.ui.widgets.panels import EventLog, GpuPanel, HeaderBar, SparkClock, SparkPanel

__all__ = [
    "EVENTS_MIN_LINES",
    "FLEET_HINTS",
    "LOG_STRIP_LABEL",
    "MIN_HEIGHT",
    "MIN_WIDTH",
    "SPARK_MIN_S",
    "SPARK_POINTS",
    "TALL_MIN_HEIGHT",
    "BottomArea",
    "OverviewScreen",
    "empty_hint",
    "spark_clock",
    "spark_form",
    "why_badges",
]

TALL_MIN_HEIGHT = 34
"""Terminal height from which the sparklines may take the full form (one a line, beside the
event log); the width must be at least ``WIDE_MIN_WIDTH`` too."""

EVENTS_MIN_LINES = 3
"""The compact sparklines show only where the event log keeps at least this many lines."""

MIN_WIDTH, MIN_HEIGHT = 64, 12
"""Below this the overview shows the header (verdict included) and a "too small" hint."""

SPARK_MIN_S = 2.0
"""Sparklines (minutes of history) repaint at most this often; a new selection at once."""

SPARK_POINTS = 600
"""Sparklines are sized for ``fmt.SPARK_SPAN_S`` (5 min) of samples at the refresh interval,
but at most this many (2.5 min at 0.25 s), and read only the points their cells draw."""

_SPARK_FMT = {"ttft_p50": fmt.fmt_s, "ttft_p95": fmt.fmt_s, "itl_p95": fmt.fmt_s,
              "gen_tps": fmt.fmt_num, "running": fmt.fmt_num, "waiting": fmt.fmt_num,
              "kv": fmt.fmt_pct}


LOG_STRIP_LABEL = "log err"
"""The sparklines' strip of the selected engine's log errors at their time (where its log is
followed): a mark in each cell holding one, the count over the span shown."""

_SPARK_Q = {"ttft_p50": ("ttft_s", "p50"), "ttft_p95": ("ttft_s", "p95"),
            "itl_p95": ("itl_s", "p95")}
"""Latency captions come from the row's quantiles, so a bound keeps its ``<``/``>`` mark."""


def why_badges(findings: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """Row key (``target|model``) -> (rule, severity) of each engine's top warn/critical
    finding (``llmtop.diagnose``, root cause first), for the engines table's STATE cell."""
    out: dict[str, tuple[str, str]] = {}
    for f in findings:
        if f.severity in ("warn", "critical"):
            out.setdefault(f"{f.target}|{f.model or ''}", (f.rule, f.severity))
    return out


def spark_form(width: int, height: int, room: int) -> str | None:
    """How the sparklines show in a ``width`` x ``height`` terminal whose area under the GPU
    lines is ``room`` lines high: ``"full"`` (one a line, beside the event log: tall and wide),
    ``"compact"`` (two columns above the event log, which keeps ``EVENTS_MIN_LINES``) or None
    (folded away: the event log takes the room)."""
    n = len(SPARK_FIELDS)
    if (width >= WIDE_MIN_WIDTH and height >= TALL_MIN_HEIGHT
            and room >= SparkPanel.lines_needed(n, compact=False)):
        return "full"
    if room >= SparkPanel.lines_needed(n, compact=True) + EVENTS_MIN_LINES:
        return "compact"
    return None


def spark_clock(source: Source, interval_s: float, spark_w: int) -> tuple[SparkClock, int]:
    """Where the series end and how much history sparklines ``spark_w`` cells wide show,
    and how many newest points to read for them.

    The cells are sized for ``fmt.SPARK_SPAN_S`` at ``interval_s`` (``SPARK_POINTS`` at
    most); the points read cover the whole cells ``spark_w`` draws, plus two cells to spare
    should the panel render a little narrower (a cell holds more samples then)."""
    span_points = max(1, min(SPARK_POINTS, math.ceil(fmt.SPARK_SPAN_S / max(interval_s, 1e-3))))
    count = source.series_count()
    if count is None:
        read = span_points
        return SparkClock(None, span_points, interval_s, tuple(source.series_times(read))), read
    k, last = fmt.spark_plan(count, spark_w, span_points)
    read = min(count, last + 2 * k)
    return SparkClock(count, span_points, interval_s, tuple(source.series_times(read))), read


class BottomArea(Container):
    """The room under the GPU lines: sparklines (when they fit) and the event log.

    Its height is what the widgets above leave (``1fr``), which nothing inside it changes, so
    the sparklines' form is decided from its own size after layout (``on_resize``): showing
    or folding them never changes the size the decision was made from.
    """

    def on_resize(self, event: Resize) -> None:
        screen = self.screen
        if isinstance(screen, OverviewScreen):
            screen.fit_sparks(event.size.height)


class OverviewScreen(Screen):
    """The default screen; ``view`` is the app's data and view state."""

    BINDINGS = [
        Binding("s", "sort_next", "Sort", tooltip="sort by the next column", id="sort"),
        Binding("S", "sort_reverse", "Order", tooltip="reverse the sort order",
                id="sort_reverse"),
        Binding("slash", "filter", "Filter", key_display="/", id="filter"),
        Binding("enter", "details", "Details", id="details"),
        Binding("L", "logs", "Log", tooltip="the selected engine's log: following, / search, "
                "e errors only, t jump to a time", id="logs"),
        Binding("f", "toggle_ranks", "Ranks", tooltip="fold per-rank rows out/in", id="ranks"),
        Binding("c", "collapse", "Collapse", show=False, id="collapse",
                tooltip="fold the selected group: a model's instances under its total row "
                        "(fleet), a router's backends or a pool's members under its row"),
        Binding("escape", "back", "Back", show=False, tooltip="clear the filter", id="back"),
    ]

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        use_crop_compositor(self)  # a tick renders only the lines it repaints
        self.view = view
        self.collapsed: set[str] = set()
        """Head keys (``ui.groups``) whose rows are folded under them: a model's total row
        (fleet mode), a router's row, a P/D pool's row."""
        self._empty_problem: tuple[Any, ...] | None = None
        """The source problem the empty hint shows (None: the direct mode's hint)."""

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield EnginesTable(id="engines")
        yield Static(empty_hint(), id="empty-hint")
        yield Static("GPUs", id="gpu-title", classes="section")
        yield GpuPanel(id="gpus")
        with BottomArea(id="bottom"):
            yield SparkPanel(id="sparks")
            yield EventLog(id="events")
        yield Static(id="too-small")
        yield Input(placeholder="filter: target, engine, model or state", id="filter")
        yield FitFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A key the mode makes inert (``c``: fleet mode only) is neither shown nor run."""
        allows = getattr(self.app, "mode_allows", None)
        return allows(action) if allows is not None else True

    _sparks_at = 0.0
    _spark_form: str | None = None

    def on_mount(self) -> None:
        self.query_one(EnginesTable).focus()
        self._apply_size(self.app.size.width, self.app.size.height)

    def on_resize(self, event: Resize) -> None:
        self._apply_size(event.size.width, event.size.height)

    def _apply_size(self, width: int, height: int) -> None:
        wide = width >= WIDE_MIN_WIDTH
        self.set_class(wide, "-wide")
        self.set_class(height >= TALL_MIN_HEIGHT, "-tall")
        tiny = width < MIN_WIDTH or height < MIN_HEIGHT
        self.set_class(tiny, "-tiny")
        if tiny:
            self.query_one("#too-small", Static).update(
                f"Terminal too small ({width}\u00d7{height}): the engines table needs at least "
                f"{MIN_WIDTH}\u00d7{MIN_HEIGHT}. Enlarge the window; ? help, q quit.")
        rebuilt = self.query_one(EnginesTable).set_layout(width)
        if self.view.snapshot is not None:  # the name column follows the width at once
            self.refresh_data(force=rebuilt)

    def fit_sparks(self, room: int) -> None:
        """Show the sparklines in the form ``room`` (the bottom area's height) allows."""
        width, height = self.app.size
        form = spark_form(width, height, room)
        if form != self._spark_form:
            self._spark_form = form
            bottom = self.query_one(BottomArea)
            bottom.set_class(form == "full", "-full")
            bottom.set_class(form == "compact", "-compact")
            self.query_one(SparkPanel).set_compact(form == "compact")
        if form is not None and self.view.snapshot is not None:
            # shown, or wider: read enough points for the new width now
            self._sparks_at = time.monotonic()
            self._paint_sparks()

    # -- painting -----------------------------------------------------------------------------
    def refresh_data(self, *, force: bool = False) -> None:
        """Paint the latest snapshot (called by the app at most a few times a second)."""
        view = self.view
        snap = view.snapshot
        st = view.state
        self.query_one(HeaderBar).show(
            host=view.source.host, now=snap.time if snap else view.clock(),
            interval_s=st.interval_s, paused=st.paused, verdict=view.verdict,
            replay=view.replay_badge(),
            window=f"latency over {_window(snap)}" if self.has_class("-wide") else _window(snap))
        if snap is None:
            return
        self.set_class(not snap.engines, "-empty")
        if not snap.engines:
            problem = getattr(view.source, "problem", None)
            text = problem() if problem else None
            search = getattr(getattr(view.source, "monitor", None), "rediscovery", None)
            every = getattr(search, "every_s", None)
            notes = tuple(getattr(search, "notes", ()) or ())  # what it could not read
            if (text, every, notes) != self._empty_problem:  # repainted only when it changes
                self._empty_problem = (text, every, notes)
                self.query_one("#empty-hint", Static).update(empty_hint(text, every, notes))
        table = self.query_one(EnginesTable)
        if force:
            table.repaint_all()
        table.update_rows(
            snap.engines, sort_column=st.sort_column, sort_reverse=st.sort_reverse,
            filter_text=st.filter_text, show_ranks=st.show_ranks, th=view.thresholds,
            trend=view.trend, why=why_badges(view.diagnosis),
            groups=self._groups(), collapsed=self.collapsed)
        self.query_one(GpuPanel).show(snap.gpus, snap.gpu_error, view.thresholds,
                                      wide=self.has_class("-wide"))
        now = time.monotonic()
        if self._spark_form and (force or now - self._sparks_at >= SPARK_MIN_S):
            self._sparks_at = now
            self._paint_sparks()
        self.query_one(EventLog).set_events(view.source.events())

    def _paint_sparks(self) -> None:
        row = self.query_one(EnginesTable).selected_row()
        if row is None:
            self.query_one(SparkPanel).set_series("", [])
            return
        source = self.view.source
        panel = self.query_one(SparkPanel)
        clock, points = spark_clock(source, self.view.state.interval_s,
                                    panel.spark_width(self._panel_width(panel)))
        series = []
        for field, label in SPARK_FIELDS:
            values = source.series(row.key, field, points) if points > 0 else []
            q = _SPARK_Q.get(field)
            if q is not None:
                caption = fmt.quantile_text(getattr(row, q[0]), q[1])
            else:
                last = next((v for v in reversed(values) if v is not None), None)
                if last is None:  # no history yet (a fleet total's first refresh): the row's
                    last = row_value(row, field)
                caption = _SPARK_FMT.get(field, fmt.fmt_num)(last)
            series.append((label, values, caption))
        if row.log is not None:  # its log's errors at their time, under the same clock
            marks, n = error_marks(log_events(self.view.snapshot, row.target), clock.times,
                                   self.view.state.interval_s)
            loc = row.log.location
            readable = loc is not None and not loc.error  # unreadable: not known, not 0
            series.append((LOG_STRIP_LABEL, marks[-points:] if points > 0 else [],
                           str(n) if readable else fmt.DASH))
        name = fmt.row_name(row)
        if row.rank is not None:  # name the engine, not just " └ rank 1"
            name = " ".join(x for x in (fmt.compact_target(row.target), row.model,
                                        f"rank {row.rank}") if x)
        panel.set_series(name, series, clock)

    def _panel_width(self, panel: SparkPanel) -> int:
        """The panel's width: its own once laid out, else what its form will give it."""
        if panel.size.width > 0:
            return panel.size.width
        width = self.app.size.width
        return width - 2 if self._spark_form == "compact" else width // 2 - 3

    @on(EnginesTable.RowHighlighted)
    def _row_moved(self) -> None:
        if self._spark_form:
            self._paint_sparks()

    @on(EnginesTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_details()

    # -- actions ------------------------------------------------------------------------------
    def action_sort_next(self) -> None:
        """Sort by the next column the table shows."""
        st = self.view.state
        keys = [c.key for c in COLUMNS]
        cur = keys.index(st.sort_column) if st.sort_column in keys else -1
        names = [c.key for c in self.query_one(EnginesTable).visible_columns()]
        st.sort_column = next((k for k in keys[cur + 1:] + keys[: cur + 1] if k in names),
                              keys[0])
        self._reorder()

    def action_sort_reverse(self) -> None:
        self.view.state.sort_reverse = not self.view.state.sort_reverse
        self._reorder()

    def _reorder(self) -> None:
        self.query_one(EnginesTable).order_dirty = True
        self.refresh_data()

    def action_toggle_ranks(self) -> None:
        self.view.state.show_ranks = not self.view.state.show_ranks
        self._reorder()

    def _groups(self) -> Groups | None:
        """The table's groups: fleet mode's per-model total rows (the monitor's ``totals``,
        only those of a model with rows in the snapshot: a refresh that failed after a good
        one kept its totals, which showed numbers over no row at all) and the snapshot's
        routers with their backends and pools; None when there is neither."""
        snap = self.view.snapshot
        if snap is None:
            return None
        totals = getattr(getattr(self.view.source, "monitor", None), "totals", None)
        models = {r.model for r in snap.engines}
        totals = [t for t in totals or () if t.model in models]
        groups = model_groups(totals, snap.engines) + stack_groups(
            snap.engines, snap.routers)
        return groups if groups.heads else None

    def action_collapse(self) -> None:
        """Fold (or unfold) the group of the selected row: a model under its total row
        (fleet mode), a router's backends or a pool's members under its row."""
        table = self.query_one(EnginesTable)
        row = table.selected_row()
        groups = self._groups()
        key = fold_key(groups, row.key) if row is not None and groups else None
        if key is None:
            return
        self.collapsed ^= {key}
        self._reorder()
        if key in self.collapsed and key in table.row_keys:
            table.move_cursor(row=table.row_keys.index(key))  # the folded rows' head

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = self.view.state.filter_text
        box.add_class("-open")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.view.state.filter_text = event.value
        self._reorder()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.query_one("#filter", Input).remove_class("-open")
        self.query_one(EnginesTable).focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("-open") or self.view.state.filter_text:
            box.value = ""
            self.view.state.filter_text = ""
            box.remove_class("-open")
            self.query_one(EnginesTable).focus()
            self._reorder()

    def action_details(self) -> None:
        row = self.query_one(EnginesTable).selected_row()
        groups = self._groups() or Groups()
        kind = groups.kind(row.key) if row is not None else None
        if row is not None and kind is RowKind.ROUTER:
            from llmtop.ui.screens.router import RouterDetailScreen

            self.app.push_screen(RouterDetailScreen(self.view, groups.routers[row.key].target))
        elif kind in (RowKind.MODEL_TOTAL, RowKind.POOL):
            self.action_collapse()  # a model's total row, a pool's row
        elif row is not None:
            from llmtop.ui.screens.detail import EngineDetailScreen

            self.app.push_screen(EngineDetailScreen(self.view, row.key))

    def action_logs(self) -> None:
        row = self.query_one(EnginesTable).selected_row()
        if row is not None:
            from llmtop.ui.screens.logs import LogScreen

            self.app.push_screen(LogScreen(self.view, row.target))

    def selected_target(self) -> str | None:
        row = self.query_one(EnginesTable).selected_row()
        return row.target if row is not None else None


FLEET_HINTS = (
    ("--prometheus URL", "the base URL (+ path prefix: Mimir, VM cluster)"),
    ("--match SELECTOR", "label matchers of the engines' series"),
    ("llmtop demo fleet", "try fleet mode on a local demo fleet"),
)
"""What to check when a fleet source gives no rows (the problem is shown above them)."""


def empty_hint(problem: str | None = None, search_every_s: float | None = None,
               notes: Sequence[str] = ()) -> Align:
    """What to do when no engine was found, centred under the (empty) engines table; with
    ``problem`` (fleet mode: the server's failure), that failure and what to check; with
    ``search_every_s`` (no TARGET given), that the search goes on; ``notes``: what the search
    could not read (other network namespaces without root) and what to do."""
    t = Table.grid(padding=(0, 3))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(style="dim")
    for cmd, what in FLEET_HINTS if problem else NO_TARGETS_HINTS:
        t.add_row(cmd, what)
    title = Text(problem or "No inference engine found on this machine.", style="bold")
    lines = [Align.center(title)]
    if search_every_s and not problem:
        lines.append(Align.center(Text(
            f"Looking again every {search_every_s:g} s: an engine that starts shows up here.",
            style="dim")))
    lines += [Align.center(Text(n, style=fmt.S("gauge-warn"))) for n in notes]
    return Align.center(Group(*lines, Text(""), t))


def _window(snap) -> str:
    if snap is None:
        return fmt.DASH
    return units.window(snap.window_s)
