"""``LogLines``: an engine's log events, newest at the bottom, following or paused.

- Each event is drawn whole: its first row starts with the time and a severity tag
  (``03:12:04 ERR``), its other lines (a traceback's) under the text column; the headline
  line (a traceback's exception line) is bold, in the severity's colour.
- Long lines wrap at word boundaries under the text column, at most ``MAX_WRAP`` rows a
  line; a longer line ends in ``…`` (a bounded row count per event, whatever it holds).
  Control characters show as ``\ufffd``, tabs as spaces: every row fits the width.
- Following: the newest rows stay in view as events arrive. Any move that leaves the bottom
  pauses it; a move back to the bottom (``End``, ``G``) follows again. While paused, the
  top row stays on the same event as older events drop out of the kept ones.
- Search: every occurrence of the needle is highlighted (case-insensitive), the current
  match more strongly; ``step_match`` moves between lines that hold it.
- Only the rows in view are drawn; the layout (spans into each line) is kept per event and
  width, so a tick that adds events lays out only the new ones.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rich.cells import cell_len, get_character_cell_size
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from llmtop.model.logs import LogEvent
from llmtop.ui import fmt
from llmtop.ui.fmt import S

__all__ = ["MAX_WRAP", "PREFIX_W", "SEV_TAGS", "WRAP_MARK", "LogLines", "RowIndex", "display_text",
           "event_lines", "headline_index", "wrap_spans"]

SEV_TAGS = {"debug": "DBG", "info": "INF", "warning": "WRN", "error": "ERR",
            "critical": "CRT"}
"""The severity tag of an event's first row (unknown severities: ``INF``)."""

_SEV_STYLE = {"warning": "gauge-warn", "error": "gauge-crit", "critical": "gauge-crit"}

PREFIX_W = 13
"""Cells before an event's text: ``HH:MM:SS ERR `` (other rows are indented as much)."""

MAX_WRAP = 8
"""Rows one line may take; a longer line is cut there with ``…``."""

WRAP_MARK = "\u21b3"
"""Before a row that goes on with the line above it (a long line, wrapped)."""

MIN_TEXT_W = 10
"""The text column is never narrower than this (a very narrow terminal crops the rows)."""

def display_text(line: str) -> str:
    """``line`` as drawn: tabs expanded to spaces, anything else that does not print (control
    characters, a lone surrogate left by a bad decode) as ``\ufffd``."""
    if line.isprintable():
        return line
    out = line.expandtabs(4) if "\t" in line else line
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in out)


def event_lines(ev: LogEvent) -> tuple[str, ...]:
    """The event's lines (its headline when it has none)."""
    return ev.lines or (ev.headline,)


def headline_index(ev: LogEvent) -> int:
    """Which of the event's lines is its headline: the line equal to it, else the last line
    holding it, else the first."""
    lines = event_lines(ev)
    if ev.headline in lines:
        return lines.index(ev.headline)
    for i in range(len(lines) - 1, -1, -1):
        if ev.headline and ev.headline in lines[i]:
            return i
    return 0


def wrap_spans(text: str, width: int, max_rows: int = MAX_WRAP
               ) -> tuple[list[tuple[int, int]], bool]:
    """``[start, end)`` character spans of ``text`` (as drawn) for rows ``width`` cells wide,
    broken at a space in the row's second half where there is one; at most ``max_rows``,
    and whether the text went on past them (the last row is then drawn ending in ``…``)."""
    width = max(1, width)
    n = len(text)
    ascii_ = text.isascii()
    if ascii_ and n <= width:  # most lines: one row
        return [(0, n)], False
    spans: list[tuple[int, int]] = []
    if ascii_:
        i = 0
        while i < n and len(spans) <= max_rows:
            j = min(i + width, n)
            if j < n:
                sp = text.rfind(" ", i + width // 2, j)
                if sp > i:
                    j = sp + 1
            spans.append((i, j))
            i = j
    else:  # wide characters: by cells
        start, cells = 0, 0
        for i, ch in enumerate(text):
            w = get_character_cell_size(ch)
            if cells + w > width and i > start:
                spans.append((start, i))
                if len(spans) > max_rows:
                    break
                start, cells = i, 0
            cells += w
        else:
            spans.append((start, n))
    if not spans:
        spans = [(0, 0)]
    cut = len(spans) > max_rows or spans[-1][1] < n
    return spans[:max_rows], cut


Row = tuple[int, int, int, int, bool]
"""One drawn row: (event index, line index, start, end, cut)."""


class RowIndex(Sequence[Row]):
    """The drawn rows of every event, indexed by row, without one tuple a row: each event's
    rows (kept per event) and where each event starts; a row is found by bisection."""

    __slots__ = ("_rel", "_starts", "_total")

    def __init__(self, rel: list[list[tuple[int, int, int, bool]]], starts: list[int]) -> None:
        self._rel = rel
        self._starts = starts
        self._total = starts[-1] + len(rel[-1]) if rel else 0

    def __len__(self) -> int:
        return self._total

    def __getitem__(self, r):  # type: ignore[override]
        if isinstance(r, slice):
            return [self[i] for i in range(*r.indices(self._total))]
        if r < 0:
            r += self._total
        if not 0 <= r < self._total:
            raise IndexError(r)
        i = bisect.bisect_right(self._starts, r) - 1
        return (i, *self._rel[i][r - self._starts[i]])


class LogLines(Widget, can_focus=True):
    """The events given to ``set_events`` (oldest first), drawn from ``top``."""

    DEFAULT_CSS = "LogLines { height: 1fr; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.events: list[LogEvent] = []
        self.rows: Sequence[Row] = RowIndex([], [])
        self.starts: list[int] = []
        """The first row of each event."""
        self.top = 0
        self.following = True
        self.needle = ""
        self.matches: list[tuple[int, int]] = []
        """(event index, line index) of each line holding the needle, oldest first."""
        self.current: int | None = None
        """Index into ``matches`` of the match moved to last."""
        self.empty_text: Text = Text("no log events yet", style="dim")
        self._laid: dict[int, tuple[LogEvent, int, list[tuple[int, int, int, bool]]]] = {}
        self._width = 0

    # -- layout -------------------------------------------------------------------------------
    def _text_width(self, width: int | None = None) -> int:
        w = self.size.width if width is None else width
        return max(MIN_TEXT_W, (w or 80) - PREFIX_W)

    def _event_rows(self, ev: LogEvent, width: int) -> list[tuple[int, int, int, bool]]:
        hit = self._laid.get(id(ev))
        if hit is not None and hit[0] is ev and hit[1] == width:
            return hit[2]
        rows: list[tuple[int, int, int, bool]] = []
        for li, line in enumerate(event_lines(ev)):
            spans, cut = wrap_spans(display_text(line), width)
            last = len(spans) - 1
            rows.extend((li, s, e, cut and k == last) for k, (s, e) in enumerate(spans))
        return rows

    def _layout(self) -> None:
        width = self._text_width()
        laid: dict[int, tuple[LogEvent, int, list[tuple[int, int, int, bool]]]] = {}
        rels: list[list[tuple[int, int, int, bool]]] = []
        starts: list[int] = []
        at = 0
        for ev in self.events:
            rel = self._event_rows(ev, width)
            laid[id(ev)] = (ev, width, rel)
            rels.append(rel)
            starts.append(at)
            at += len(rel)
        self._laid, self.starts, self._width = laid, starts, width
        self.rows = RowIndex(rels, starts)

    @property
    def max_top(self) -> int:
        return max(0, len(self.rows) - max(1, self.size.height))

    def _anchor(self) -> tuple[LogEvent, int] | None:
        """The event at the top row and how far into it: what a paused view keeps."""
        if not self.rows or self.top >= len(self.rows):
            return None
        i = self.rows[self.top][0]
        return self.events[i], self.top - self.starts[i]

    def set_events(self, evs: Sequence[LogEvent]) -> None:
        """Show ``evs`` (oldest first): following, the newest rows; paused, the same top."""
        anchor = None if self.following else self._anchor()
        self.events = list(evs)
        self._layout()
        self.top = self._top_for(anchor)
        self._find_matches()
        self.refresh()

    def _top_for(self, anchor: tuple[LogEvent, int] | None) -> int:
        if self.following:
            return self.max_top
        if anchor is None:
            return min(self.top, self.max_top)
        ev, off = anchor
        where = next((i for i in range(len(self.events) - 1, -1, -1)
                      if self.events[i] is ev), None)
        if where is None:  # the same event in a new object (a store rebuilt by a replay)
            where = next((i for i in range(len(self.events) - 1, -1, -1)
                          if self.events[i] == ev), None)
        if where is None:  # dropped from the kept events: the oldest left
            return 0
        return min(self.starts[where] + off, self.max_top)

    def on_resize(self, event: events.Resize) -> None:
        anchor = None if self.following else self._anchor()
        if self._text_width(event.size.width) != self._width:
            self._layout()
        self.top = self._top_for(anchor)
        self.refresh()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return container.height

    # -- moving -------------------------------------------------------------------------------
    def move_to(self, top: int) -> None:
        """Put row ``top`` at the top; following again exactly when that is the bottom."""
        self.top = max(0, min(top, self.max_top))
        self.following = self.top >= self.max_top
        self.refresh()

    def scroll_rows(self, n: int) -> None:
        self.move_to(self.top + n)

    def page(self, n: int) -> None:
        self.scroll_rows(n * max(1, self.size.height - 1))

    def follow(self) -> None:
        self.move_to(len(self.rows))

    def jump_to_time(self, t: float) -> bool:
        """Show from the first event at or after ``t`` (the newest before it when none is
        after it); False when there are no events."""
        if not self.events:
            return False
        times = [ev.t_wall for ev in self.events]
        i = bisect.bisect_left(times, t) if times == sorted(times) else next(
            (k for k, x in enumerate(times) if x >= t), len(times))
        self.move_to(self.starts[min(i, len(self.events) - 1)])
        return True

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.scroll_rows(-3)
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.scroll_rows(3)
        event.stop()

    # -- search -------------------------------------------------------------------------------
    def set_needle(self, needle: str) -> None:
        self.needle = needle
        self.current = None
        self._find_matches()
        self.refresh()

    def _find_matches(self) -> None:
        low = self.needle.lower()
        cur = self.matches[self.current] if self.current is not None and \
            self.current < len(self.matches) else None
        if not low:
            self.matches, self.current = [], None
            return
        self.matches = [(i, li) for i, ev in enumerate(self.events)
                        for li, line in enumerate(event_lines(ev))
                        if low in display_text(line).lower()]
        if cur is not None and self.current is not None:
            self.current = self.matches.index(cur) if cur in self.matches else None

    def step_match(self, direction: int) -> bool:
        """Move to the next (1, newer) or previous (-1, older) line holding the needle,
        wrapping; the first move goes to the newest match. False when there is none."""
        if not self.matches:
            return False
        if self.current is None:
            self.current = len(self.matches) - 1
        else:
            self.current = (self.current + direction) % len(self.matches)
        ev_i, li = self.matches[self.current]
        row = next(r for r in range(self.starts[ev_i], len(self.rows))
                   if self.rows[r][1] == li)  # the event's first row of that line
        if not self.top <= row < self.top + self.size.height:
            self.move_to(row - max(0, self.size.height // 3))
        else:
            self.following = self.top >= self.max_top
        self.refresh()
        return True

    # -- drawing ------------------------------------------------------------------------------
    def row_text(self, r: int) -> Text:
        """Row ``r`` as drawn (without the widget's base style)."""
        ev_i, li, s, e, cut = self.rows[r]
        ev = self.events[ev_i]
        t = Text(no_wrap=True, overflow="crop", end="")
        if li == 0 and s == 0:
            sev = _SEV_STYLE.get(ev.severity)
            t.append(fmt.clock(ev.t_wall) + " ", style="" if ev.stamped else "dim")
            t.append(SEV_TAGS.get(ev.severity, "INF"), style=S(sev + " bold") if sev else "dim")
            t.append(" ")
        elif s == 0:
            t.append(" " * PREFIX_W)
        else:  # the same line, wrapped
            t.append(" " * (PREFIX_W - 2))
            t.append(WRAP_MARK, style="dim")
            t.append(" ")
        line = display_text(event_lines(ev)[li])
        part = line[s:e]
        if cut:
            part = (part[:-1] if part else "") + "\u2026"
        head = li == headline_index(ev) and (len(event_lines(ev)) > 1 or ev.severity in
                                             _SEV_STYLE)
        sev = _SEV_STYLE.get(ev.severity)
        t.append(part, style=(S(sev) + " bold" if sev else "bold") if head else "")
        if self.needle:
            self._highlight(t, line, s, len(part), (ev_i, li))
        return t

    def _highlight(self, t: Text, line: str, s: int, n: int, where: tuple[int, int]) -> None:
        low, needle = line.lower(), self.needle.lower()
        current = self.current is not None and self.matches[self.current] == where
        style = S("accent bold reverse") if current else "reverse"
        at = low.find(needle)
        while at >= 0:
            a, b = max(at, s), min(at + len(needle), s + n)
            if a < b:
                t.stylize(style, PREFIX_W + a - s, PREFIX_W + b - s)
            at = low.find(needle, at + 1)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        style = self.rich_style
        r = self.top + y
        if not self.rows:  # why there is nothing: wrapped to the width
            said = self.empty_text.wrap(self.app.console, max(1, width))
            text = said[y] if y < len(said) else Text("")
        elif r >= len(self.rows):
            return Strip.blank(width, style)
        else:
            text = self.row_text(r)
        if cell_len(text.plain) > width:
            text = text.copy()
            text.truncate(width, overflow="ellipsis")
        segments = list(text.render(self.app.console))
        return Strip(segments).crop_extend(0, width, None).apply_style(style)

    def visible_text(self) -> list[str]:
        """The rows in view as plain text (tests)."""
        h = self.size.height
        return [self.row_text(r).plain for r in range(self.top, min(len(self.rows),
                                                                    self.top + h))]
