"""The probe screen's live curves, drawn by plotext (textual-plotext).

The same three charts as the HTML report (``llmtop.report.charts``), one at a time:

- ``throughput``: output tok/s against load (log2 axis, ``c=`` ticks);
- ``ttft``: TTFT p50 and p95 (ms) against load, the TTFT SLO as a horizontal line;
- ``latency``: TTFT p95 (ms) against output tok/s, the SLO as a line.

The knee and the SLA boundary are vertical lines labelled ``K`` and ``S`` (their loads are
in the title). Readable at 38x9 cells (half an 80x24 screen).
"""

from __future__ import annotations

import math
from typing import Any

from textual_plotext import PlotextPlot

__all__ = ["CHART_KINDS", "ProbeChart"]

CHART_KINDS = ("throughput", "ttft", "latency")
MARKER = "hd"
"""Half-block cells: twice the vertical resolution, and drawn by every terminal font
(braille dots are finer, but many fonts, and SVG screenshots, misplace them)."""
_TITLES = {"throughput": "out tok/s vs load", "ttft": "TTFT ms vs load",
           "latency": "TTFT p95 ms vs tok/s"}


def _g(d: Any, k: str) -> Any:
    return d.get(k) if isinstance(d, dict) else getattr(d, k, None)


def _load(s: dict) -> float | None:
    v = _g(s, "concurrency") or _g(s, "rate")
    return float(v) if v else None


def _tick(v: float, rate: bool) -> str:
    return f"{v:g}/s" if rate else f"c={v:g}"


def _short(v: float) -> str:
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:.0f}"


class ProbeChart(PlotextPlot):
    """One of ``CHART_KINDS`` for the finished steps; ``show()`` redraws it."""

    DEFAULT_CSS = """
    ProbeChart { width: 1fr; height: 1fr; min-height: 7; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.theme = "clear"  # terminal colours: no theme variables needed
        self.kind = CHART_KINDS[0]
        self.steps: list[dict] = []
        self.slo_s: float | None = None
        self.marks: dict[str, float] = {}
        self.display = False

    def show(self, steps: list[dict], *, kind: str | None = None, slo_s: float | None = None,
             knee: float | None = None, sla: float | None = None) -> None:
        self.steps = [s for s in steps if _load(s) and not _g(s, "partial")]
        self.steps.sort(key=lambda s: _load(s) or 0)
        self.kind = kind or self.kind
        self.slo_s = slo_s
        self.marks = {k: v for k, v in (("K", knee), ("S", sla)) if v}
        self.display = bool(self.steps)  # no axes without a finished step
        self._draw()
        self.refresh()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.theme("clear")
        plt.frame(True)
        steps = self.steps
        rate = bool(steps) and not _g(steps[0], "concurrency")
        marks = "  ".join(f"{k}={_tick(v, rate)}" for k, v in self.marks.items())
        plt.title(f"{_TITLES[self.kind]}{'  ' + marks if marks else ''}")
        if not steps:
            plt.plot([0.0], [0.0], marker=" ")
            return
        loads = [_load(s) or 1.0 for s in steps]
        xs = [math.log2(v) for v in loads]
        tps = [_g(s, "output_tokens_per_s") or 0.0 for s in steps]
        ttft = [_g(s, "ttft_s") or {} for s in steps]
        p95 = [(q.get("p95") or 0.0) * 1000 for q in ttft]
        if self.kind == "latency":
            plt.plot(tps, p95, marker=MARKER, color="red")
            if self.slo_s:
                plt.hline(self.slo_s * 1000, color="yellow")
            for k, v in self.marks.items():
                if v in loads:
                    plt.vline(tps[loads.index(v)], color="green" if k == "K" else "cyan")
            self._yticks(p95)
            top = max(tps, default=0.0)
            if top > 0:
                plt.xticks([top * i / 2 for i in range(3)],
                           [_short(top * i / 2) for i in range(3)])
            return
        if self.kind == "throughput":
            plt.plot(xs, tps, marker=MARKER, color="blue")
        else:
            p50 = [(q.get("p50") or 0.0) * 1000 for q in ttft]
            plt.plot(xs, p50, marker=MARKER, color="blue")
            plt.plot(xs, p95, marker=MARKER, color="red")
            if self.slo_s:
                plt.hline(self.slo_s * 1000, color="yellow")
        for k, v in self.marks.items():
            plt.vline(math.log2(v), color="green" if k == "K" else "cyan")
        step = max(1, math.ceil(len(xs) / 4))  # at most ~4 ticks fit in 38 columns
        shown = xs[::step]
        plt.xticks(shown, [_tick(2 ** x, rate) for x in shown])
        self._yticks(tps if self.kind == "throughput" else p95)

    def _yticks(self, ys: list[float]) -> None:
        """Four short y labels (``1.2k``, ``350``): more room for the curve."""
        top = max(ys, default=0.0)
        if top <= 0:
            return
        ticks = [top * i / 3 for i in range(4)]
        self.plt.yticks(ticks, [_short(t) for t in ticks])
