"""GPU detail (``g``): every field, per-process memory, throttle reasons in words, history."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from llmtop.model import GpuRecord
from llmtop.ui import fmt
from llmtop.ui.source import gpu_key
from llmtop.ui.widgets.panels import gpu_line

if TYPE_CHECKING:
    from llmtop.ui.app import LlmtopApp

__all__ = ["GpuScreen", "gpu_table"]

HISTORY_FIELDS = (("util", "SM util", fmt.fmt_pct), ("mem_used", "VRAM", fmt.fmt_bytes),
                  ("power", "power W", fmt.fmt_num), ("temp", "temp \u00b0C", fmt.fmt_num))
"""GPU series the store keeps (``GPU_SERIES_FIELDS``): field, label, format."""
SKIP = {"processes", "extra", "mig_instances", "throttle"}


def _val(name: str, v: object) -> str:
    if v is None:
        return fmt.DASH
    if name.endswith("_bytes") and isinstance(v, (int, float)):
        return fmt.fmt_bytes(v)
    if name.endswith("_bytes_s") and isinstance(v, (int, float)):
        return fmt.fmt_bytes(v) + "/s"
    if name in ("util", "mem_util") and isinstance(v, float):
        return fmt.fmt_pct(v)
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def gpu_table(g: GpuRecord, history: dict[str, list[float | None]], width: int) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    for f in fields(g):
        if f.name in SKIP:
            continue
        t.add_row(f.name, _val(f.name, getattr(g, f.name)))
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
    spark_w = max(10, width - 30)
    for key, label, f in HISTORY_FIELDS:
        values = history.get(key, [])
        last = next((v for v in reversed(values) if v is not None), None)
        line = Text(fmt.sparkline(values, spark_w), style=fmt.S("accent"))
        line.append(f"  {f(last)}")
        t.add_row(label, line)
    return t


class GpuScreen(Screen):
    """All GPUs, in full."""

    app: LlmtopApp
    BINDINGS = [Binding("escape", "back", "Back", id="gpu_back")]

    def compose(self) -> ComposeResult:
        yield Static("GPUs", classes="title")
        with VerticalScroll(classes="detail-body"):
            yield Static(id="gpu-body")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_data()
        self.query_one(VerticalScroll).focus()

    def refresh_data(self, *, force: bool = False) -> None:
        snap = self.app.snapshot
        body = self.query_one("#gpu-body", Static)
        if snap is None:
            body.update("waiting for the first sample…")
            return
        if not snap.gpus:
            body.update(Text(f"GPU unavailable: {snap.gpu_error or 'no GPUs reported'}"))
            return
        width = self.app.size.width
        parts = Table.grid()
        for g in snap.gpus:
            key = gpu_key(g)
            hist = {f: self.app.source.gpu_series(key, f) for f, _, _ in HISTORY_FIELDS}
            parts.add_row(gpu_line(g, self.app.thresholds, wide=width >= 120))
            parts.add_row(gpu_table(g, hist, width))
            parts.add_row("")
        body.update(parts)

    def action_back(self) -> None:
        self.app.pop_screen()
