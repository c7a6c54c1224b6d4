"""Requests (``r``): the window's single requests, slowest first.

- Each request's time split (queue / prefill / decode), from the engines' spans
  (``history.request_window``); requests in flight (llama-server ``/slots``) on top with their age.
- Above them, the window's shape (the history's summary: how the slowest differ from the
  rest).
- Keys: ``s``/``S`` sort, ``/`` filters, ``v`` widens the window, ``esc`` goes back. Works in
  replay: the recording's spans.

- The window is read (ranked and summed up) at most every ``REFRESH_MIN_S`` on the app's
  ticks, and at once when the sort or the window changes.
- The filter and the order work on the last read: typing does not read the window again
  (the whole window is ranked at most once per read, when a filter or the order first asks).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from llmtop import clock
from llmtop.history.request_window import KEEP_S, SORT_KEYS, RequestSummary, RequestWindow
from llmtop.model.request_records import InflightRequest, RequestRecord
from llmtop.ui.screens.requests_cells import (
    PHASES,
    SORT_LABELS,
    Col,
    empty_text,
    inflight_cells,
    matches,
    request_cells,
    request_layout,
    selected_text,
    shape_text,
)
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter

__all__ = ["REFRESH_MIN_S", "SHOW_MAX", "WINDOWS", "RequestsScreen", "request_window"]

WINDOWS = (60.0, 300.0, KEEP_S)
"""The windows ``v`` steps through (seconds): 1 min, 5 min, all that is kept (10 min)."""

SHOW_MAX = 200
"""At most this many rows in the table (the slowest, after the filter): the title says how
many there were."""

REFRESH_MIN_S = 2.0
"""The window is re-read (ranked, summed up, the table rebuilt) at most this often unless
the sort or the window changed: a full window is thousands of requests to rank and sum."""


@dataclass(slots=True)
class _Read:
    """One read of the window: what the filter and the order then work on."""

    what: tuple[Any, ...]
    """(window object, sort, window length) it was read for."""
    at: float
    """When (``RequestsScreen.ticks``)."""
    t_wall: float
    summary: RequestSummary | None
    live: list[InflightRequest]
    top: list[RequestRecord]
    """The ``SHOW_MAX`` slowest by the sort."""
    every: list[RequestRecord] | None = None
    """All of them, slowest first: ranked when a filter or the order first asks."""


def request_window(view: LiveView) -> RequestWindow | None:
    """The source's request window, or None: a source that has none (fleet mode), or whose
    store keeps none."""
    try:
        return view.source.request_window()
    except Exception:
        return None


def _label(window_s: float) -> str:
    return f"{window_s / 60:g} min" if window_s >= 60 else f"{window_s:g} s"


def _title(by: str, reverse: bool, label: str) -> str:
    arrow = "\u25b2" if reverse else "\u25bc"
    return (f"Requests \u00b7 last {label} \u00b7 by {SORT_LABELS[by]} {arrow} \u00b7 "
            + "  ".join(f"{g} {w}" for _f, g, _c, w in PHASES))


class RequestsScreen(Screen):
    """The requests of the window (see the module doc)."""

    ticks: Callable[[], float] = staticmethod(clock.monotonic)
    """The clock the read throttle runs on."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="clear the filter, else go back",
                id="requests_back"),
        Binding("s", "sort_next", "Sort", tooltip="sort by the next of TTFT, e2e, queue, "
                "prefill, decode, prompt and output tokens", id="requests_sort"),
        Binding("S", "sort_reverse", "Order", tooltip="slowest or fastest first",
                id="requests_order"),
        Binding("slash", "filter", "Filter", key_display="/",
                tooltip="engine, request id, probe/traffic or finish reason",
                id="requests_filter"),
        Binding("v", "next_window", "Window", tooltip="1 min, 5 min, 10 min",
                id="requests_window"),
        Binding("L", "logs", "Log", tooltip="the selected request's log lines (by its id, "
                "where the engine logs request ids)", id="requests_logs"),
    ]

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        self.view = view
        self.by = "ttft_s"
        self.reverse = False
        self.window_s = WINDOWS[0]
        self.filter_text = ""
        self.shown: list[RequestRecord | InflightRequest] = []
        """The table's rows, in order (in-flight first)."""
        self.total = 0
        """Rows before the ``SHOW_MAX`` cut (after the filter)."""
        self._layout: list[Col] | None = None
        self._keys: list[tuple[str, str]] = []
        self._read: _Read | None = None
        self._painted: tuple[Any, ...] | None = None
        """(read, filter, order) of the last paint."""

    def compose(self) -> ComposeResult:
        yield Static("Requests", classes="title")
        yield Static(id="requests-shape")
        yield Input(placeholder="/ filter: engine, request id, probe/traffic, finish reason",
                    id="requests-filter")
        yield DataTable(id="requests-table", cursor_type="row", cell_padding=0)
        yield Static(id="requests-empty")
        yield Static(id="requests-selected")
        yield FitFooter()

    def on_mount(self) -> None:
        self.refresh_data(force=True)
        self.query_one("#requests-table", DataTable).focus()

    def on_resize(self, event: Resize) -> None:
        if self._read is not None:
            self._show(self._read, force=True)

    # -- data ---------------------------------------------------------------------------------
    def _rows(self, read: _Read, window: RequestWindow | None
              ) -> tuple[list[RequestRecord | InflightRequest], int]:
        """The rows to show (in flight first, at most ``SHOW_MAX``) and how many matched,
        from the last read. Unfiltered and slowest first, only the ``SHOW_MAX`` slowest
        were ranked; else the whole window is, once per read."""
        needle = self.filter_text
        live = [r for r in read.live if matches(r, needle)]
        count = read.summary.count if read.summary is not None else 0
        if not needle and not self.reverse:
            return [*live, *read.top][:SHOW_MAX], len(live) + count
        if read.every is None:
            read.every = window.slowest(self.window_s, read.t_wall, by=self.by) \
                if window is not None else []
        done = [r for r in read.every if matches(r, needle)]
        if self.reverse:
            have = [r for r in done if r.get(self.by) is not None]
            done = have[::-1] + done[len(have):]
        rows = [*live, *done]
        return rows[:SHOW_MAX], len(rows)

    def _read_window(self, window: RequestWindow | None, what: tuple[Any, ...], now: float
                     ) -> _Read:
        snap = self.view.snapshot
        t_wall = snap.time if snap is not None else self.view.clock()
        if window is None:
            return _Read(what, now, t_wall, None, [], [])
        summary = window.summary(self.window_s, t_wall, by=self.by) if len(window) else None
        top = window.slowest(self.window_s, t_wall, by=self.by, n=SHOW_MAX) \
            if summary is not None else []
        return _Read(what, now, t_wall, summary, window.inflight_list(), top)

    def refresh_data(self, *, force: bool = False) -> None:
        """Read the window when ``force``, when the sort or the window changed, or when
        ``REFRESH_MIN_S`` passed since the last read; then show it."""
        window = request_window(self.view)
        what = (id(window), self.by, self.window_s)
        now = self.ticks()
        read = self._read
        if (force or read is None or read.what != what
                or now - read.at >= REFRESH_MIN_S):
            read = self._read = self._read_window(window, what, now)
        self._show(read, force=force)

    def _show(self, read: _Read, *, force: bool = False) -> None:
        """Show ``read`` with the filter and order as they are now (nothing when that is
        what is shown already, unless ``force``)."""
        painted = (id(read), self.filter_text, self.reverse)
        if not force and painted == self._painted:
            return
        self._painted = painted
        window = request_window(self.view)
        summary = read.summary
        rows, self.total = self._rows(read, window)
        label = _label(self.window_s)
        title = _title(self.by, self.reverse, label)
        if self.total > len(rows):
            title += f" \u00b7 {len(rows)} of {self.total}"
        if self.filter_text:
            title += f" \u00b7 /{self.filter_text}"
        self.query_one(".title", Static).update(title)
        inflight = sum(1 for r in rows if isinstance(r, InflightRequest))
        shape = shape_text(summary.to_json() if summary is not None else None, label,
                           inflight)
        box = self.query_one("#requests-shape", Static)
        box.display = bool(shape.plain)
        box.update(shape)
        empty = not rows
        self.set_class(empty, "-empty")
        if empty:
            self.query_one("#requests-empty", Static).update(empty_text(
                window, label, replay=self.view.replay is not None,
                filtered=self.filter_text if window is not None and len(window) else ""))
        self._paint_table(rows, force)
        self._show_selected()

    def _paint_table(self, rows: list[RequestRecord | InflightRequest], force: bool) -> None:
        t = self.query_one("#requests-table", DataTable)
        cols = request_layout(self.size.width or self.app.size.width)
        keys = [(r.target or "", r.id) for r in rows]
        if not force and cols == self._layout and keys == self._keys and rows == self.shown:
            return
        selected = self._selected()
        if cols != self._layout:
            t.clear(columns=True)
            for c in cols:
                t.add_column(c.label.rjust(c.width) if c.right else " " + c.label,
                             width=c.width, key=c.key)
        else:
            t.clear()
        for i, r in enumerate(rows):
            cells = (inflight_cells(r, cols) if isinstance(r, InflightRequest)
                     else request_cells(r, cols))
            t.add_row(*cells, key=str(i))
        self._layout, self._keys, self.shown = cols, keys, rows
        if selected is not None:
            key = (selected.target or "", selected.id)
            if key in keys:
                t.move_cursor(row=keys.index(key), animate=False)

    def _selected(self) -> RequestRecord | InflightRequest | None:
        t = self.query_one("#requests-table", DataTable)
        if not self.shown or not 0 <= t.cursor_row < len(self.shown):
            return None
        return self.shown[t.cursor_row]

    @on(DataTable.RowHighlighted, "#requests-table")
    def _row_highlighted(self) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        self.query_one("#requests-selected", Static).update(selected_text(self._selected()))

    # -- keys ---------------------------------------------------------------------------------
    def action_sort_next(self) -> None:
        self.by = SORT_KEYS[(SORT_KEYS.index(self.by) + 1) % len(SORT_KEYS)]
        self.refresh_data(force=True)

    def action_sort_reverse(self) -> None:
        self.reverse = not self.reverse
        self.refresh_data()

    def action_next_window(self) -> None:
        i = WINDOWS.index(self.window_s) if self.window_s in WINDOWS else -1
        self.window_s = WINDOWS[(i + 1) % len(WINDOWS)]
        self.refresh_data(force=True)

    def action_filter(self) -> None:
        box = self.query_one("#requests-filter", Input)
        box.add_class("-open")
        box.focus()

    @on(Input.Changed, "#requests-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.refresh_data()

    @on(Input.Submitted, "#requests-filter")
    def _filter_done(self) -> None:
        self.query_one("#requests-table", DataTable).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``L`` only where logs are followed (``LlmtopApp.mode_allows``)."""
        allows = getattr(self.app, "mode_allows", None)
        return allows(action) if allows is not None and action == "logs" else True

    def action_logs(self) -> None:
        """The log view of the selected request's engine, only the lines naming it."""
        req = self._selected()
        if req is None or not req.target:
            return
        from llmtop.ui.screens.logs import LogScreen

        self.app.push_screen(LogScreen(self.view, req.target, request_id=req.id))

    def action_back(self) -> None:
        box = self.query_one("#requests-filter", Input)
        if box.has_focus or self.filter_text:
            box.value = ""
            self.filter_text = ""
            box.remove_class("-open")
            self.query_one("#requests-table", DataTable).focus()
            self.refresh_data()
            return
        self.app.pop_screen()
