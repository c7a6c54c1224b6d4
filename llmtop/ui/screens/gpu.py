"""GPUs (``g``), laid out like nvitop: one row per GPU (bars for utilisation and VRAM, power
against its limit, temperature, clocks, throttle reasons in words), the selected GPU's other
readings, one table of the processes on every GPU (pid, user, engine, VRAM, command), and the
selected GPU's history. Up/down selects a GPU; a missing value is ``–``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import NamedTuple

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import DataTable, Static

from llmtop.config import Thresholds
from llmtop.gpu.reasons import unavailable_line
from llmtop.model import GpuProcess, GpuRecord
from llmtop.ui import fmt
from llmtop.ui.fmt import DASH, S
from llmtop.ui.screens.overview import SPARK_MIN_S, spark_clock
from llmtop.ui.source import gpu_key
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.footer import FitFooter
from llmtop.ui.widgets.gpu_text import (
    THROTTLE_SHOWN,
    act,
    activity_items,
    has_activity,
    throttle_time_text,
)
from llmtop.ui.widgets.panels import LOCAL_HOSTS, SparkClock, short_gpu_name
from llmtop.verdict import short_target

__all__ = ["ACTIVITY_HISTORY", "HISTORY_FIELDS", "GpuDetails", "GpuScreen", "gpu_cells",
           "gpu_details", "gpu_layout", "history_rows", "process_cells", "process_layout",
           "throttle_words"]

HISTORY_FIELDS = (("sm_active", "SM", fmt.fmt_pct), ("dram_active", "DRAM", fmt.fmt_pct),
                  ("util", "busy", fmt.fmt_pct), ("mem_used", "VRAM", fmt.fmt_bytes),
                  ("power", "power W", fmt.fmt_num), ("temp", "temp \u00b0C", fmt.fmt_num))
"""GPU series the store keeps (``GPU_SERIES_FIELDS``): field, label, format; real activity
first, where the GPU reports it."""

ACTIVITY_HISTORY = frozenset({"sm_active", "dram_active"})
"""History rows shown only for a GPU that reported them in the kept span (GPM, DCGM, the
demo): a GPU with busy time only gets no empty activity rows."""

WIDE = 120
"""From this width: longer bars, the full GPU name, longer headers."""

SCROLLBAR_RESERVE = 1


class Col(NamedTuple):
    key: str
    label: str
    width: int
    right: bool = False


def gpu_layout(width: int, name_w: int = 0, *, activity: bool = False) -> list[Col]:
    """The GPU table's columns for a ``width`` cells wide screen; THROTTLE takes the rest.
    ``name_w``: the longest GPU name (``host:index NAME``); the GPU column grows towards it
    from THROTTLE's room beyond 8 cells (fleet hosts were cut to ``demo-no``).
    ``activity``: a GPU reports real activity: SM activity leads (bar), then tensor, DRAM
    and busy time; below ``WIDE`` the VRAM bar and the clocks give their room (the details
    show the clocks), so a fleet name (``demo-node-0:0 H100``) still fits at 80."""
    wide = width >= WIDE
    bw = 12 if wide else 5
    gpu_w = (12 if activity else 26) if wide else 8
    lead = [Col("util", "BUSY", bw + 6)]
    if activity:
        lead = [Col("sm", "SM ACTIVE" if wide else "SM", bw + 6),
                Col("tensor", "TENSOR" if wide else "TC", 8 if wide else 5, True),
                Col("dram", "DRAM", 6, True), Col("busy", "BUSY", 6, True)]
    narrow = activity and not wide  # the VRAM bar and the clocks give their room
    tail = [Col("mem", "VRAM USED/TOTAL" if wide else "VRAM", 9 if narrow else bw + 9),
            Col("power", "POWER/LIMIT" if wide else "POWER W", 12 if wide else 9, True),
            Col("temp", "TEMP", 6, True)]
    if not narrow:
        tail.append(Col("clock", "SM/MEM MHZ" if wide else "SM/MEM", 11 if wide else 10, True))
    fixed = sum(c.width for c in (*lead, *tail))
    spare = width - SCROLLBAR_RESERVE - fixed - gpu_w - 8
    gpu_w += max(0, min(name_w + 1 - gpu_w, spare))
    cols = [Col("gpu", "GPU", gpu_w), *lead, *tail]
    rest = width - SCROLLBAR_RESERVE - sum(c.width for c in cols)
    cols.append(Col("throttle", "THROTTLE REASONS" if wide else "THROTTLE", max(8, rest)))
    return cols


def process_layout(width: int) -> list[Col]:
    """The process table's columns; COMMAND takes the rest. BUSY: the share of time the
    process had a kernel running (``GpuProcess.sm_util``), busy time like the GPU's."""
    wide = width >= WIDE
    cols = [Col("gpu", "GPU", 5, True), Col("pid", "PID", 9, True),
            Col("user", "USER", 13 if wide else 10), Col("engine", "ENGINE", 26 if wide else 16),
            Col("mem", "VRAM", 9, True), Col("busy", "SM BUSY" if wide else "BUSY",
                                               9 if wide else 6, True)]
    rest = width - SCROLLBAR_RESERVE - sum(c.width for c in cols)
    cols.append(Col("cmd", "COMMAND", max(8, rest)))
    return cols


def _gpu_name(g: GpuRecord, width: int) -> str:
    """``host:index NAME``: the full name where it fits ``width``, else the short one."""
    host = "" if g.host in LOCAL_HOSTS else f"{g.host}:"
    full = f"{host}{g.index} {(g.name or 'GPU').replace('NVIDIA ', '')}"
    return full if cell_len(full) <= width else (
        f"{host}{g.index} {short_gpu_name(g.name)}")


def _gib(v: float | None) -> str:
    if v is None:
        return DASH
    g = v / 1024**3
    return f"{g:.0f}" if g >= 10 else f"{g:.1f}"


def throttle_words(g: GpuRecord) -> str:
    """Active clock-event reasons in words (``power cap, thermal slowdown``), ``none`` when
    the GPU runs unthrottled (idle is not a throttle), ``–`` when not reported."""
    if g.throttle is None:
        return DASH
    words = [r for r in g.throttle if r.lower() not in ("idle", "gpu idle", "none")]
    return ", ".join(words) if words else "none"


def throttle_cell_text(g: GpuRecord) -> str:
    """The THROTTLE cell: the share of the interval each limit held the clocks down
    (``power 35%``) where the source reports it, then the active reasons it does not name;
    else the reasons alone (``throttle_words``)."""
    words = throttle_words(g)
    held = throttle_time_text(g)
    if held is None or held == "none":
        return words
    held_by = g.throttle_time if isinstance(g.throttle_time, dict) else {}
    keys = [str(k).lower() for k, v in held_by.items()
            if (x := act(v)) is not None and x >= THROTTLE_SHOWN]
    rest = [r for r in (g.throttle or []) if r.lower() not in ("idle", "gpu idle", "none")
            and not any(k in r.lower() for k in keys)]
    return " · ".join([held, *rest])


def gpu_cells(g: GpuRecord, cols: Sequence[Col], th: Thresholds) -> list[Text]:
    """One GPU row, a cell per column of ``gpu_layout`` (each cell starts with a space)."""
    out: list[Text] = []
    for c in cols:
        w = c.width - 1
        t = Text(" ", no_wrap=True, overflow="ellipsis")
        if c.key == "gpu":
            t.append(_gpu_name(g, w)[:w], style="bold")
        elif g.error and c.key != "throttle":
            pass
        elif c.key in ("util", "sm"):
            v = act(g.util if c.key == "util" else g.sm_active)
            t.append_text(fmt.bar(v, w - 5, fmt.level_style(v, th.util_warn, th.util_crit)))
            t.append(f"{fmt.fmt_pct(v):>5}")
        elif c.key in ("tensor", "dram", "busy"):
            v = act({"tensor": g.tensor_active, "dram": g.dram_active, "busy": g.util}[c.key])
            t.append(fmt.fmt_pct(v).rjust(w), style="dim" if v is None or c.key == "busy"
                     else "")
        elif c.key == "mem":
            frac = None
            if g.mem_used_bytes is not None and g.mem_total_bytes:
                frac = g.mem_used_bytes / g.mem_total_bytes
            text = f"{_gib(g.mem_used_bytes)}/{_gib(g.mem_total_bytes)}G"
            if w >= 12:
                t.append_text(fmt.bar(frac, w - 8, fmt.level_style(frac, th.kv_warn,
                                                                   th.kv_crit)))
            t.append(f"{text:>8}")
        elif c.key == "power":
            pw = DASH if g.power_w is None else f"{g.power_w:.0f}"
            pl = "" if g.power_limit_w is None else f"/{g.power_limit_w:.0f}"
            t.append(f"{pw}{pl}W".rjust(w))
        elif c.key == "temp":
            hot = (g.temp_c is not None and g.temp_slowdown_c is not None
                   and g.temp_c >= g.temp_slowdown_c - 5)
            temp = DASH if g.temp_c is None else f"{g.temp_c:.0f}\u00b0C"
            t.append(temp.rjust(w), style=S("gauge-crit") if hot else "")
        elif c.key == "clock":
            sm = DASH if g.sm_clock_mhz is None else f"{g.sm_clock_mhz:.0f}"
            mem = DASH if g.mem_clock_mhz is None else f"{g.mem_clock_mhz:.0f}"
            t.append(f"{sm}/{mem}".rjust(w))
        elif c.key == "throttle":
            if g.error:
                t.append(f"error: {g.error}", style=S("gauge-crit"))
            else:
                words = throttle_cell_text(g)
                t.append(words, style=S("gauge-warn") if words not in ("none", DASH) else "dim")
        t.truncate(c.width, overflow="ellipsis")
        out.append(t)
    return out


def process_cells(g: GpuRecord, p: GpuProcess, cols: Sequence[Col]) -> list[Text]:
    """One process row, a cell per column of ``process_layout``."""
    host = "" if g.host in LOCAL_HOSTS else f"{g.host}:"
    values = {
        "gpu": f"{host}{g.index}", "pid": DASH if p.pid is None else str(p.pid),
        "user": p.user or DASH,
        "engine": short_target(p.engine_target) if p.engine_target else DASH,
        "mem": fmt.fmt_bytes(p.used_bytes), "busy": fmt.fmt_pct(act(p.sm_util)),
        "cmd": (p.cmdline or p.name or DASH) if p.visible else "(pid not visible here)",
    }
    out = []
    for c in cols:
        v = values[c.key]
        style = S("accent") if c.key == "engine" and p.engine_target else (
            "dim" if v == DASH or (c.key == "cmd" and not p.visible) else "")
        t = Text(" " + (v.rjust(c.width - 1) if c.right else v), style=style, no_wrap=True,
                 overflow="ellipsis")
        t.truncate(c.width, overflow="ellipsis")
        out.append(t)
    return out


def _energy(joules: float, source: str | None) -> str:
    """A lifetime energy counter in J/kJ/MJ/GJ (NVML counts from the driver's load)."""
    since = "since driver load" if source == "nvml" else "lifetime counter"
    for div, unit in ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")):
        if abs(joules) >= div:
            return f"{joules / div:.1f} {unit} {since}"
    return f"{joules:.0f} J {since}"


DETAIL_LINES = 3
"""Lines of the selected GPU's details at least (8 GPUs and the history fit at 80x24)..."""
DETAIL_LINES_TALL = 6
"""...and at most: more where the GPUs and processes leave the rows free."""


def gpu_details(g: GpuRecord, *, clocks: bool = False) -> list[tuple[str, str]]:
    """The selected GPU's other readings, as (human label, value): its activity beyond the
    table's columns first (``activity_items``: or why there is none), then only what the
    source reports (the table above shows ``–`` for its own missing values). ``clocks``:
    the current SM/memory clocks too (the narrow table with activity has no column)."""
    def rate(v: float | None) -> str | None:
        return None if v is None else fmt.fmt_bytes(v) + "/s"

    def num(v: float | None, unit: str) -> str | None:
        return None if v is None else f"{round(v, 1):g}{unit}"

    pcie = None
    if g.pcie_tx_bytes_s is not None or g.pcie_rx_bytes_s is not None:
        pcie = f"{rate(g.pcie_tx_bytes_s) or DASH} / {rate(g.pcie_rx_bytes_s) or DASH}"
    ecc = None
    if g.ecc_corrected is not None or g.ecc_uncorrected is not None:
        ecc = f"{fmt.fmt_num(g.ecc_corrected)} / {fmt.fmt_num(g.ecc_uncorrected)}"
    items: list[tuple[str, str | None]] = [*activity_items(g)]
    if clocks:
        items.append(("SM/mem clock", f"{num(g.sm_clock_mhz, '') or DASH}/"
                                      f"{num(g.mem_clock_mhz, '') or DASH} MHz"))
    items += [
        ("memory busy", None if g.mem_util is None else fmt.fmt_pct(g.mem_util)),
        ("VRAM free", None if g.mem_free_bytes is None else fmt.fmt_bytes(g.mem_free_bytes)),
        ("VRAM reserved",
         None if g.mem_reserved_bytes is None else fmt.fmt_bytes(g.mem_reserved_bytes)),
        ("fan", num(g.fan_pct, "%")), ("memory temp", num(g.mem_temp_c, "\u00b0C")),
        ("slowdown at", num(g.temp_slowdown_c, "\u00b0C")),
        ("shutdown at", num(g.temp_shutdown_c, "\u00b0C")),
        ("SM max", num(g.sm_clock_max_mhz, " MHz")),
        ("memory max", num(g.mem_clock_max_mhz, " MHz")),
        ("PCIe TX/RX", pcie), ("ECC corr/uncorr", ecc),
        ("last Xid", None if g.xid is None else str(g.xid)),
        ("energy", None if g.energy_j is None else _energy(g.energy_j, g.source)),
        ("MIG", None if g.mig_mode is None else ("on" if g.mig_mode else "off")),
        ("MIG instances", ", ".join(g.mig_instances) or None),
        ("PCI bus", g.pci_bus_id), ("uuid", g.uuid), ("source", g.source),
    ]
    items += [(k, f"{v:g}") for k, v in sorted(g.extra.items())]
    return [(k, v) for k, v in items if v is not None]


def details_text(g: GpuRecord, width: int = 0, max_lines: int = 0, *,
                 clocks: bool = False) -> Text:
    """``gpu_details`` as ``label value · label value ...``, packed into lines of ``width``
    cells without splitting an item; past ``max_lines`` lines the last ends with ``…`` (the
    rest needs a wider or taller terminal). ``width`` 0: one paragraph, wrapped by Rich."""
    items = [(f"{label} ", value) for label, value in gpu_details(g, clocks=clocks)]
    t = Text()
    col = line = 0
    for i, (label, value) in enumerate(items):
        n = len(label) + len(value)
        last_line = bool(max_lines) and line == max_lines - 1
        room = width - 4 if last_line and i < len(items) - 1 else width  # room for " · …"
        if i and width and col + 3 + n > room:  # the next line
            line += 1
            if max_lines and line >= max_lines:
                t.append(" \u00b7 \u2026", style="dim")
                break
            t.append("\n")
            col = 0
        elif i:
            t.append(" \u00b7 ", style="dim")
            col += 3
        t.append(label, style="dim")
        t.append(value)
        col += n
    return t


def history_rows(history: dict[str, list[float | None]], width: int,
                 clock: SparkClock) -> list[tuple[str, Text]]:
    """The history sparklines of one GPU (``HISTORY_FIELDS``), sized like the overview's: each
    cell the max of its samples, up to ``SPARK_SPAN_S`` in the width; a first row says the
    span shown. The value is the newest sample, not a cell's max."""
    spark_w = max(10, width - 30)
    n = max((len(v) for v in history.values()), default=0)
    k = clock.per_cell(n, spark_w)
    rows: list[tuple[str, Text]] = []
    span = clock.span(n, spark_w)
    if span:
        rows.append(("history", Text(f"last {span}, max per cell", style="dim")))
    for key, label, f in HISTORY_FIELDS:
        values = history.get(key, [])
        last = next((v for v in reversed(values) if v is not None), None)
        if key in ACTIVITY_HISTORY and last is None:
            continue
        line = Text(fmt.sparkline(values, spark_w, k, clock.end), style=fmt.S("accent"))
        line.append(f"  {f(last)}")
        rows.append((label, line))
    return rows


def _header(cols: Sequence[Col]) -> list[Text]:
    return [Text((" " + c.label).rjust(c.width) if c.right else " " + c.label, no_wrap=True)
            for c in cols]


def _sync(table: DataTable, cols: list[Col], rows: list[tuple[str, list[Text]]],
          shown: dict) -> None:
    """Show ``rows`` (key, cells): cells are updated in place while the keys and columns stay
    the same; otherwise the table is rebuilt and the cursor kept on its row's key."""
    keys = [k for k, _ in rows]
    if shown.get("cols") != cols or shown.get("keys") != keys:
        cur = shown.get("keys", [])[table.cursor_row] if shown.get("keys") and \
            0 <= table.cursor_row < len(shown["keys"]) else None
        table.clear(columns=True)
        for c, head in zip(cols, _header(cols), strict=True):
            table.add_column(head, width=c.width, key=c.key)
        for k, cells in rows:
            table.add_row(*cells, key=k)
        if cur in keys:
            table.move_cursor(row=keys.index(cur), animate=False)
    else:
        for (k, cells), old in zip(rows, shown["cells"], strict=True):
            for c, new, was in zip(cols, cells, old, strict=True):
                if new != was:
                    table.update_cell(k, c.key, new, update_width=False)
    shown.update(cols=cols, keys=keys, cells=[cells for _, cells in rows])


class GpuDetails(Static):
    """The selected GPU's details (``details_text``), packed into the box's own width when
    drawn: a scrollbar beside a short screen takes cells the screen's width does not show."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._shown: tuple[GpuRecord, int, bool] | None = None

    def show(self, g: GpuRecord, lines: int, *, clocks: bool) -> None:
        """Draw ``g``'s details in at most ``lines`` lines (``clocks``: with the clocks)."""
        if self._shown is None or self._shown[1:] != (lines, clocks) or self._shown[0] != g:
            self._shown = (g, lines, clocks)
            self.refresh(layout=True)  # its height (auto) follows the lines drawn

    def render(self) -> Text:
        if self._shown is None:
            return Text()
        g, lines, clocks = self._shown
        # a cell to spare for the "…" mark
        width = self.content_size.width or (self.app.size.width - 2)
        return details_text(g, max(20, width - 1), lines, clocks=clocks)


class GpuScreen(Screen):
    """Every GPU at a glance, the processes on them, the selected GPU's history."""

    BINDINGS = [Binding("escape", "back", "Back", id="gpu_back")]

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        self.view = view
        self._history: dict[str, list[tuple[str, Text]]] = {}
        self._history_at = 0.0
        self._history_width = 0
        self._gpus_shown: dict = {}
        self._procs_shown: dict = {}
        self._keys: list[str] = []
        self._activity = False

    def compose(self) -> ComposeResult:
        yield Static("GPUs", classes="title")
        yield Static(id="gpu-none")
        yield DataTable(id="gpu-table", cursor_type="row", cell_padding=0)
        yield GpuDetails(id="gpu-selected")
        yield Static("Processes", id="gpu-procs-title", classes="section")
        yield DataTable(id="gpu-procs", cursor_type="none", cell_padding=0)
        yield Static("History", id="gpu-history-title", classes="section")
        yield Static(id="gpu-history")
        yield FitFooter()

    def on_mount(self) -> None:
        self.query_one("#gpu-procs", DataTable).can_focus = False
        self.refresh_data()
        self.query_one("#gpu-table", DataTable).focus()

    def on_resize(self, event: Resize) -> None:
        self.refresh_data(force=True)

    def selected(self) -> GpuRecord | None:
        snap = self.view.snapshot
        if snap is None or not snap.gpus:
            return None
        row = self.query_one("#gpu-table", DataTable).cursor_row
        return snap.gpus[min(max(row, 0), len(snap.gpus) - 1)]

    def refresh_data(self, *, force: bool = False) -> None:
        snap = self.view.snapshot
        gpus = snap.gpus if snap is not None else []
        self.set_class(not gpus, "-none")
        title = self.query_one(".title", Static)
        if not gpus:
            title.update("GPUs")
            self.query_one("#gpu-none", Static).update(
                Text("waiting for the first sample\u2026" if snap is None
                     else unavailable_line(snap.gpu_error), style=S("gauge-warn")))
            return
        width = self.size.width or self.app.size.width
        title.update(f"GPUs \u00b7 {len(gpus)} \u00b7 \u2191\u2193 selects a GPU")
        self._activity = any(has_activity(g) for g in gpus)
        # wide with activity: the GPU column starts narrow and grows to the full names
        name_at = 40 if self._activity and width >= WIDE else 8
        cols = gpu_layout(width, max(cell_len(_gpu_name(g, name_at)) for g in gpus),
                          activity=self._activity)
        th = self.view.thresholds
        self._keys = [gpu_key(g) for g in gpus]
        _sync(self.query_one("#gpu-table", DataTable), cols,
              [(k, gpu_cells(g, cols, th)) for k, g in zip(self._keys, gpus, strict=True)],
              self._gpus_shown)
        pcols = process_layout(width)
        procs = [(f"{k}/{p.pid}/{i}", process_cells(g, p, pcols))
                 for k, g in zip(self._keys, gpus, strict=True)
                 for i, p in enumerate(sorted(g.processes, key=lambda p: -(p.used_bytes or 0)))]
        self.query_one("#gpu-procs-title", Static).update(
            f"Processes \u00b7 {len(procs)}" if procs
            else "Processes \u00b7 no process holds GPU memory (or none is reported)")
        _sync(self.query_one("#gpu-procs", DataTable), pcols, procs, self._procs_shown)
        self._show_selected(force=force)

    @on(DataTable.RowHighlighted, "#gpu-table")
    def _moved(self) -> None:
        self._show_selected(force=True)

    def _show_selected(self, *, force: bool = False) -> None:
        g = self.selected()
        if g is None:
            return
        box = self.query_one("#gpu-selected", GpuDetails)
        snap = self.view.snapshot
        n_gpus = len(snap.gpus) if snap is not None else 1
        n_procs = sum(len(x.processes) for x in snap.gpus) if snap is not None else 0
        # the rest of the screen: title, table header, the processes' title, header and
        # rows (3 at least), the history's title and 5 rows, the footer
        spare = (self.size.height or 24) - (n_gpus + 9 + max(3, n_procs) + 1)
        lines = min(DETAIL_LINES_TALL, max(DETAIL_LINES, spare))
        box.styles.max_height = lines
        width = self.size.width or self.app.size.width
        box.show(g, lines, clocks=self._activity and width < WIDE)
        key = gpu_key(g)
        now = time.monotonic()
        if (force or key not in self._history or width != self._history_width
                or now - self._history_at >= SPARK_MIN_S):
            # minutes of history: read and drawn at most every SPARK_MIN_S, as the overview
            self._history_at, self._history_width = now, width
            self._history = {key: self._read_history(key, width)}
        self.query_one("#gpu-history-title", Static).update(
            f"History \u00b7 GPU {_gpu_name(g, 40)}")
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True)
        for label, line in self._history[key]:
            grid.add_row(label, line)
        self.query_one("#gpu-history", Static).update(grid)

    def _read_history(self, key: str, width: int) -> list[tuple[str, Text]]:
        source = self.view.source
        spark_w = max(10, width - 30)
        clock, points = spark_clock(source, self.view.state.interval_s, spark_w)
        hist = {f: source.gpu_series(key, f, points) if points > 0 else []
                for f, _, _ in HISTORY_FIELDS}
        return history_rows(hist, width, clock)

    def action_back(self) -> None:
        self.app.pop_screen()
