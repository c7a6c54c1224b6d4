"""The raw metrics browser (engine detail -> ``m``): every sample a target exposes, with its
value and, for counters, its rate; filterable, keyboard-only, fitted to the terminal width.

At 80 columns the sample name, value, rate and type always fit: long names are cut with ``…``
(keeping a ``_bucket``/``_total``-style suffix), labels that every sample shares
(``model_name=...``) are left out of the labels column, and the line under the table shows the
selected sample in full, as an exposition line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from llmtop.ui import fmt
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter

__all__ = ["RawLayout", "RawMetricsScreen", "RawSample", "family_rows", "fit_columns",
           "fit_name", "fmt_value", "shared_labels"]

SCROLLBAR_RESERVE = 1
"""Kept free at the right for the vertical scrollbar (so there is never a horizontal one)."""

NAME_MIN, LABELS_MIN = 16, 16
"""Narrowest name column; the labels column keeps this much (or what it needs) first."""

VALUE_MAX, TYPE_MAX = 12, 9
"""Cells of the longest value (``fmt_value``) and type (``histogram``)."""

SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum")
"""Sample-name suffixes kept when a name is cut: they tell a family's samples apart."""


class RawSample(NamedTuple):
    """One sample line, formatted: value and rate (counters only, else ``""``) as text."""

    name: str
    value: str
    rate: str
    type: str
    labels: tuple[tuple[str, str], ...]

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, self.labels

    def search_text(self) -> str:
        """What the ``/`` filter looks in: ``name k=v,k=v`` (every label), lower case."""
        return (self.name + " " + ",".join(f"{k}={v}" for k, v in self.labels)).lower()

    def exposition(self) -> str:
        """``name{k="v",...}``: the sample as the target wrote it."""
        inner = ",".join(f'{k}="{v}"' for k, v in self.labels)
        return f"{self.name}{{{inner}}}" if inner else self.name


class RawLayout(NamedTuple):
    """Content widths of the columns (each drawn with one leading space)."""

    name: int
    value: int
    rate: int
    type: int
    labels: int


def fmt_value(v: float) -> str:
    """A sample value in at most ``VALUE_MAX`` cells with as many significant digits as fit:
    ``1203400``, ``85520809984``, ``1795360123.4``, ``0.0421``, ``1.234568e-05``, ``nan``."""
    for digits in range(VALUE_MAX, 0, -1):
        text = f"{float(v):.{digits}g}"
        if len(text) <= VALUE_MAX:
            return text
    return text


def family_rows(now: dict, prev: dict, dt: float) -> list[RawSample]:
    """Every sample, families sorted by name; rates for counters only."""
    out = []
    for name in sorted(now):
        fam = now[name]
        before = {}
        if name in prev and dt > 0:
            before = {(s.name, tuple(sorted(s.labels.items()))): s.value
                      for s in prev[name].samples}
        for s in fam.samples:
            labels = tuple(sorted(s.labels.items()))
            rate = ""
            if fam.type == "counter" and dt > 0:
                old = before.get((s.name, labels))
                if old is not None and s.value >= old:
                    rate = fmt.fmt_rate((s.value - old) / dt)
            out.append(RawSample(s.name, fmt_value(s.value), rate, fam.type, labels))
    return out


def shared_labels(samples: Sequence[RawSample]) -> set[tuple[str, str]]:
    """Label pairs that tell no sample apart: the key has one value on every sample that
    carries it (and more than one sample carries it), e.g. ``model_name`` on one engine."""
    values: dict[str, set[str]] = {}
    count: dict[str, int] = {}
    for s in samples:
        for k, v in s.labels:
            values.setdefault(k, set()).add(v)
            count[k] = count.get(k, 0) + 1
    return {(k, next(iter(vs))) for k, vs in values.items() if len(vs) == 1 and count[k] > 1}


def labels_text(sample: RawSample, shared: set[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in sample.labels if (k, v) not in shared)


def fit_name(name: str, width: int) -> str:
    """``name`` in ``width`` cells: cut with ``…`` before a known suffix, which stays."""
    if len(name) <= width:
        return name
    if width <= 1:
        return "…"[:width]
    for suf in SUFFIXES:
        if name.endswith(suf) and width >= len(suf) + 6:
            return name[: width - len(suf) - 1] + "…" + suf
    return name[: width - 1] + "…"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def fit_columns(samples: Sequence[RawSample], labels: Sequence[str], width: int,
                floor: RawLayout | None = None) -> RawLayout:
    """Column widths for a terminal ``width`` cells wide: value, rate and type as wide as
    their longest cell (never narrower than ``floor``, so they do not jitter), then the name
    up to its longest and the labels the rest, the labels keeping ``LABELS_MIN`` first."""
    value = min(VALUE_MAX, max([5, *(len(s.value) for s in samples)]))
    rate = max([6, *(len(s.rate) for s in samples)])
    type_ = min(TYPE_MAX, max([4, *(len(s.type) for s in samples)]))
    if floor is not None:
        value, rate, type_ = (max(value, floor.value), max(rate, floor.rate),
                              max(type_, floor.type))
    avail = width - SCROLLBAR_RESERVE - (value + 1) - (rate + 1) - (type_ + 1) - 2
    need_name = max([6, *(len(s.name) for s in samples)])
    need_labels = max([6, *(len(t) for t in labels)])
    name = max(NAME_MIN, min(need_name, avail - min(need_labels, LABELS_MIN)))
    return RawLayout(name, value, rate, type_, max(6, avail - name))


def _cells(s: RawSample, labels: str, lay: RawLayout) -> list[Text]:
    return [Text(" " + fit_name(s.name, lay.name), no_wrap=True),
            Text(s.value, justify="right", no_wrap=True),
            Text(s.rate, justify="right", no_wrap=True),
            Text(" " + _cut(s.type, lay.type), no_wrap=True),
            Text(" " + _cut(labels, lay.labels), no_wrap=True, style="dim")]


COLUMNS = (("metric", "left"), ("value", "right"), ("rate/s", "right"), ("type", "left"),
           ("labels", "left"))


class RawMetricsScreen(Screen):
    """Every sample the target exposes, filterable, with values and counter rates."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="clear the filter, else go back",
                id="raw_back"),
        Binding("slash", "filter", "Filter", key_display="/", id="raw_filter"),
    ]

    def __init__(self, view: LiveView, target: str) -> None:
        super().__init__()
        self.view = view
        self.target = target
        self.filter_text = ""
        self._shown: list[RawSample] = []
        self._labels: list[str] = []
        self._layout: RawLayout | None = None
        self._note = ""

    def compose(self) -> ComposeResult:
        yield Static(f"Raw metrics: {self.target}", classes="title")
        yield Input(placeholder="/ filter: metric name or label (substring)", id="raw-filter")
        yield DataTable(id="raw-table", cursor_type="row", cell_padding=0)
        yield Static(id="raw-selected")
        yield FitFooter()

    def on_mount(self) -> None:
        self.refresh_data()
        self.query_one("#raw-table", DataTable).focus()

    def on_resize(self, event: Resize) -> None:
        self.refresh_data(force=True)

    def refresh_data(self, *, force: bool = False) -> None:
        try:
            now, prev, dt = self.view.source.raw_families(self.target)
            note = ""
        except Exception as exc:
            now, prev, dt = {}, {}, 0.0
            note = f"cannot read the raw families: {exc}"
        every = family_rows(now, prev, dt)
        shared = shared_labels(every)
        needle = self.filter_text.lower()
        rows = [s for s in every if needle in s.search_text()]
        labels = [labels_text(s, shared) for s in rows]
        if not note and not every:
            note = "no raw families kept for this target (down or never scraped)"
        elif not note and not rows:
            note = f"no sample matches {self.filter_text!r} (esc clears the filter)"
        title = f"Raw metrics: {self.target}"
        if every:
            shown = f"{len(rows)} of {len(every)}" if needle else f"{len(every)}"
            title += f"  \u00b7 {shown} samples"
        self.query_one(".title", Static).update(title)
        t = self.query_one("#raw-table", DataTable)
        lay = fit_columns(rows, labels, self.size.width or self.app.size.width, self._layout)
        if force or lay != self._layout or [s.key for s in rows] != [s.key for s in self._shown]:
            self._rebuild(t, rows, labels, lay)
        elif rows != self._shown:
            for i, (old, new) in enumerate(zip(self._shown, rows, strict=True)):
                if old != new:
                    for col, cell in zip(("value", "rate/s"), _cells(new, labels[i], lay)[1:3],
                                         strict=True):
                        t.update_cell(str(i), col, cell, update_width=False)
        self._shown, self._labels, self._note = rows, labels, note
        self._show_selected()

    def _rebuild(self, t: DataTable, rows: list[RawSample], labels: list[str],
                 lay: RawLayout) -> None:
        selected = self._selected()
        t.clear(columns=True)
        widths = (lay.name + 1, lay.value + 1, lay.rate + 1, lay.type + 1, lay.labels + 1)
        for (label, justify), w in zip(COLUMNS, widths, strict=True):
            head = Text(label, justify="right") if justify == "right" else Text(" " + label)
            t.add_column(head, width=w, key=label)
        for i, s in enumerate(rows):
            t.add_row(*_cells(s, labels[i], lay), key=str(i))
        self._layout = lay
        keys = [s.key for s in rows]
        if selected is not None and selected.key in keys:
            t.move_cursor(row=keys.index(selected.key), animate=False)

    def _selected(self) -> RawSample | None:
        t = self.query_one("#raw-table", DataTable)
        if not self._shown or not 0 <= t.cursor_row < len(self._shown):
            return None
        return self._shown[t.cursor_row]

    @on(DataTable.RowHighlighted, "#raw-table")
    def _row_highlighted(self) -> None:
        self._show_selected()

    def _show_selected(self) -> None:
        """The selected sample in full (name and every label), or why there is none."""
        box = self.query_one("#raw-selected", Static)
        s = self._selected()
        if s is None:
            box.update(Text(self._note, style="dim"))
            return
        line = Text(s.exposition(), style="bold")
        line.append(f" {s.value}")
        line.append(f"  {s.type}" + (f", {s.rate}/s" if s.rate else ""), style="dim")
        box.update(line)

    @on(Input.Changed, "#raw-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.refresh_data()

    @on(Input.Submitted, "#raw-filter")
    def _filter_done(self) -> None:
        self.query_one("#raw-table", DataTable).focus()

    def action_filter(self) -> None:
        self.query_one("#raw-filter", Input).focus()

    def action_back(self) -> None:
        box = self.query_one("#raw-filter", Input)
        if box.has_focus or self.filter_text:
            box.value = ""
            self.filter_text = ""
            self.query_one("#raw-table", DataTable).focus()
            self.refresh_data()
            return
        self.app.pop_screen()
