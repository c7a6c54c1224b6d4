"""GPU detail (``g``): every field, per-process memory, throttle reasons in words, history."""

from __future__ import annotations

import time
from dataclasses import fields

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from llmtop.gpu.reasons import unavailable_line
from llmtop.model import GpuRecord
from llmtop.ui import fmt
from llmtop.ui.screens.overview import SPARK_MIN_S, spark_clock
from llmtop.ui.source import gpu_key
from llmtop.ui.view import LiveView
from llmtop.ui.widgets.panels import SparkClock, gpu_line

__all__ = ["GpuScreen", "gpu_table", "history_rows"]

HISTORY_FIELDS = (("util", "SM util", fmt.fmt_pct), ("mem_used", "VRAM", fmt.fmt_bytes),
                  ("power", "power W", fmt.fmt_num), ("temp", "temp \u00b0C", fmt.fmt_num))
"""GPU series the store keeps (``GPU_SERIES_FIELDS``): field, label, format."""
SKIP = {"processes", "extra", "mig_instances", "throttle"}


UNITS = (("_w", " W"), ("_c", " \u00b0C"), ("_mhz", " MHz"), ("_pct", "%"))
"""Field-name suffix -> unit shown after the value (field names stay the JSON keys)."""


def _val(name: str, v: object) -> str:
    if v is None:
        return fmt.DASH
    if isinstance(v, bool):
        return "on" if v else "off"
    if name.endswith("_bytes") and isinstance(v, (int, float)):
        return fmt.fmt_bytes(v)
    if name.endswith("_bytes_s") and isinstance(v, (int, float)):
        return fmt.fmt_bytes(v) + "/s"
    if name in ("util", "mem_util") and isinstance(v, float):
        return fmt.fmt_pct(v)
    if isinstance(v, (int, float)):
        unit = next((u for suffix, u in UNITS if name.endswith(suffix)), "")
        return f"{round(v, 1):g}{unit}" if isinstance(v, float) else f"{v}{unit}"
    return str(v)


def _energy(joules: float, source: str | None) -> str:
    """A lifetime energy counter in J/kJ/MJ/GJ (NVML counts from the driver's load)."""
    since = "since driver load" if source == "nvml" else "lifetime counter"
    for div, unit in ((1e9, "GJ"), (1e6, "MJ"), (1e3, "kJ")):
        if abs(joules) >= div:
            return f"{joules / div:.1f} {unit} {since}"
    return f"{joules:.0f} J {since}"


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
        line = Text(fmt.sparkline(values, spark_w, k, clock.end), style=fmt.S("accent"))
        line.append(f"  {f(last)}")
        rows.append((label, line))
    return rows


def gpu_table(g: GpuRecord, history: list[tuple[str, Text]]) -> Table:
    """Every field of one GPU, then its ``history_rows``."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    for f in fields(g):
        if f.name in SKIP:
            continue
        v = getattr(g, f.name)
        if f.name == "energy_j" and isinstance(v, (int, float)):
            t.add_row(f.name, _energy(v, g.source))
        else:
            t.add_row(f.name, _val(f.name, v))
    thr = g.throttle
    t.add_row("throttle", fmt.DASH if thr is None else (", ".join(thr) if thr else "none active"))
    if g.mig_instances:
        t.add_row("MIG instances", ", ".join(g.mig_instances))
    for k, v in sorted(g.extra.items()):
        t.add_row(k, f"{v:g}")
    if g.processes:
        for p in g.processes:
            who = p.engine_target or "unattributed"
            vis = "" if p.visible else " (pid not visible here)"
            t.add_row(f"pid {p.pid}", f"{p.name or '?'}  {fmt.fmt_bytes(p.used_bytes)}  "
                      f"{who}{vis}")
    else:
        t.add_row("processes", "none reported")
    for label, line in history:
        t.add_row(label, line)
    return t


class GpuScreen(Screen):
    """All GPUs, in full."""

    BINDINGS = [Binding("escape", "back", "Back", id="gpu_back")]

    def __init__(self, view: LiveView) -> None:
        super().__init__()
        self.view = view
        self._history: dict[str, list[tuple[str, Text]]] = {}
        self._history_at = 0.0
        self._history_width = 0

    def compose(self) -> ComposeResult:
        yield Static("GPUs", classes="title")
        with VerticalScroll(classes="detail-body"):
            yield Static(id="gpu-body")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_data()
        self.query_one(VerticalScroll).focus()

    def refresh_data(self, *, force: bool = False) -> None:
        snap = self.view.snapshot
        body = self.query_one("#gpu-body", Static)
        if snap is None:
            body.update("waiting for the first sample…")
            return
        if not snap.gpus:
            body.update(Text(unavailable_line(snap.gpu_error)))
            return
        width = self.app.size.width
        keys = [gpu_key(g) for g in snap.gpus]
        now = time.monotonic()
        if (force or width != self._history_width or now - self._history_at >= SPARK_MIN_S
                or any(k not in self._history for k in keys)):
            # minutes of history: read and drawn at most every SPARK_MIN_S, as the overview
            self._history_at, self._history_width = now, width
            self._history = self._read_history(keys, width)
        parts = Table.grid()
        for g, key in zip(snap.gpus, keys, strict=True):
            parts.add_row(gpu_line(g, self.view.thresholds, wide=width >= 120))
            parts.add_row(gpu_table(g, self._history.get(key, [])))
            parts.add_row("")
        body.update(parts)

    def _read_history(self, keys: list[str], width: int) -> dict[str, list[tuple[str, Text]]]:
        source = self.view.source
        spark_w = max(10, width - 30)
        clock, points = spark_clock(source, self.view.state.interval_s, spark_w)
        out = {}
        for key in keys:
            hist = {f: source.gpu_series(key, f, points) if points > 0 else []
                    for f, _, _ in HISTORY_FIELDS}
            out[key] = history_rows(hist, width, clock)
        return out

    def action_back(self) -> None:
        self.app.pop_screen()
