"""Probe charts as SVG, drawn by pygal (a dependency of llmtop-tui).

Three charts per report (several reports are overlaid, one colour each):

- ``throughput``: output tok/s against load;
- ``ttft``: TTFT p50 and p95 against load, the TTFT SLO drawn as a line;
- ``latency_throughput``: TTFT p95 against output tok/s (the latency-throughput curve), the
  SLO as a line.

The knee (saturation point) and the SLA boundary are marked on every chart as their own
labelled points (``knee c=48``, ``SLA boundary c=32``). Load is on a log2 axis (the sweep
ladder doubles). The SVGs carry no script that fetches anything: they open offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from llmtop.loadgen.report import load_text, slo_text

__all__ = ["CHARTS", "charts_available", "render_charts", "scatter_chart"]

CHARTS = ("throughput", "ttft", "latency_throughput")
"""Chart names, also the suffixes of ``--svg PREFIX-<name>.svg``."""
TITLES = {"throughput": "Output tok/s vs load", "ttft": "TTFT vs load",
          "latency_throughput": "TTFT p95 vs output tok/s"}


def charts_available() -> str | None:
    """None when pygal imports, else what to install."""
    try:
        import pygal  # noqa: F401
    except ImportError:
        return ("charts need pygal, a dependency of llmtop-tui missing from this Python: "
                "pip install pygal (the JSON/CSV/Markdown reports need nothing extra)")
    return None


def _key(report: dict[str, Any]) -> str:
    steps = report.get("steps") or []
    return "rate" if steps and steps[0].get("rate") and not steps[0].get("concurrency") \
        else "concurrency"


def _steps(report: dict[str, Any]) -> list[dict[str, Any]]:
    key = _key(report)
    return sorted((s for s in report.get("steps", [])
                   if s.get("requests") and not s.get("partial") and s.get(key)),
                  key=lambda s: s[key])


def _ms(v: float | None) -> float | None:
    return None if v is None else v * 1000.0


def _marks(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(label, step) for the knee and the SLA boundary, where found."""
    out = []
    by_index = {s.get("index"): s for s in _steps(report)}
    sat, sla = report.get("saturation"), report.get("sla_boundary")
    knee = sat.get("step") if sat else None
    edge = sla.get("step") if sla and sla.get("met") else None
    if knee is not None and knee == edge and knee in by_index:
        return [(f"knee = SLA boundary {load_text(sat)}", by_index[knee])]
    if knee in by_index:
        out.append((f"knee {load_text(sat)}", by_index[knee]))
    if edge in by_index:
        out.append((f"SLA boundary {load_text(sla)}", by_index[edge]))
    return out


PALETTE = ("#1f77b4", "#d62728", "#8c564b", "#17becf", "#7f7f7f", "#bcbd22")
"""Curves, one colour per series (p50 and p95 of one report differ); marks have their own."""
KNEE_COLOUR, SLA_COLOUR, SLO_COLOUR = "#2ca02c", "#9467bd", "#ff7f0e"


def _style(colours: list[str]) -> Any:
    from pygal.style import Style

    return Style(background="white", plot_background="white", font_family="sans-serif",
                 colors=tuple(colours) or PALETTE,
                 title_font_size=16, legend_font_size=12, label_font_size=11,
                 major_label_font_size=11, value_label_font_size=12,
                 guide_stroke_color="#e3e3e3", guide_stroke_dasharray="0",
                 major_guide_stroke_color="#e3e3e3", major_guide_stroke_dasharray="0")


def _chart(kind: str, title: str, load_axis: str, xs: list[float],
           tps: list[float], room: tuple[float, float] = (0.9, 1.18)) -> Any:
    import pygal

    cfg: dict[str, Any] = {
        "title": title, "js": [], "disable_xml_declaration": True, "width": 800,
        "height": 480, "legend_at_bottom": True,
        "legend_at_bottom_columns": 2, "show_x_guides": False, "dots_size": 3,
        "allow_interruptions": True, "print_values": False, "truncate_legend": -1,
        "print_labels": True,
    }
    if kind == "latency_throughput":
        cfg.update(x_title="output tok/s", y_title="TTFT p95 (ms)")
        if tps:  # room on the right for a mark's label
            cfg["xrange"] = (0, max(tps) * room[1])
    else:
        cfg.update(x_title=f"load ({load_axis}, log scale)",
                   y_title="output tok/s" if kind == "throughput" else "TTFT (ms)")
        if xs:
            cfg["x_labels"] = sorted(set(xs))
            cfg["xrange"] = (min(xs), max(xs) + room[0])
            prefix = "c=" if load_axis == "concurrency" else ""
            suffix = " req/s" if load_axis != "concurrency" else ""
            cfg["x_value_formatter"] = lambda x: f"{prefix}{2 ** x:.3g}{suffix}"
    return pygal.XY(**cfg)


def _span(vals: list[float | None]) -> float:
    known = [v for v in vals if v is not None]
    return (max(known) - min(known)) if len(known) > 1 and max(known) > min(known) else 1.0


def _shared_labels(marks: list[tuple[str, str, tuple[float, Any]]], xspan: float,
                   yspan: float) -> dict[int, list[str]]:
    """Marks of several reports that say the same at (nearly) the same place share one label:
    ``{id(point) of the labelled one: [report names]}``; the others are drawn unlabelled."""
    out: dict[int, list[str]] = {}
    heads: list[tuple[str, tuple[float, Any]]] = []
    for name, lbl, pt in marks:
        for hl, hp in heads:
            if hl == lbl and pt[1] is not None and hp[1] is not None and \
                    abs(pt[0] - hp[0]) <= 0.04 * xspan and abs(pt[1] - hp[1]) <= 0.05 * yspan:
                out[id(hp)].append(name)
                break
        else:
            heads.append((lbl, pt))
            out[id(pt)] = [name]
    return out


def render_charts(reports: Sequence[dict[str, Any]],
                  names: Sequence[str] | None = None, *,
                  colour_per_report: bool = False) -> dict[str, str]:
    """``{chart name: SVG text}`` for one report, or several overlaid.

    ``colour_per_report`` (a bake-off): each report keeps one colour in every chart, the TTFT
    chart draws p95 only, and each knee / SLA boundary label names its report."""
    multi = len(reports) > 1
    room = (1.6, 1.4) if colour_per_report and multi else (0.9, 1.18)  # the longer labels
    names = list(names or [r.get("target", f"report {i}") for i, r in enumerate(reports)])
    load_axis = _key(reports[0]) if reports else "concurrency"
    xs = [math.log2(s[_key(r)]) for r in reports for s in _steps(r)]
    tps_all = [s["output_tokens_per_s"] for r in reports for s in _steps(r)]
    out = {}
    for kind in CHARTS:
        title = "TTFT p95 vs load" if colour_per_report and kind == "ttft" else TITLES[kind]
        chart = _chart(kind, title, load_axis, xs, tps_all, room)
        colours: list[str] = []

        plotted: list[tuple[str, list[Any]]] = []

        def add(title: str, values: list[Any], colour: str, colours: list[str] = colours,
                chart: Any = chart, plotted: list[Any] = plotted, **kw: Any) -> None:
            chart.add(title, values, **kw)
            colours.append(colour)
            plotted.append((title, [v for v in values if isinstance(v, tuple)]))

        slo = None
        curve = 0
        pending: list[tuple[str, str, tuple[float, Any]]] = []
        names_of: dict[int, list[str]] = {}
        for nth, (name, rep) in enumerate(zip(names, reports, strict=True)):
            tag = f"{name}: " if multi else ""
            steps = _steps(rep)
            key = _key(rep)

            def lx(s: dict[str, Any], key: str = key) -> float:
                return math.log2(s[key])

            def next_colour(nth: int = nth) -> str:
                nonlocal curve
                if colour_per_report:
                    return PALETTE[nth % len(PALETTE)]
                curve += 1
                return PALETTE[(curve - 1) % len(PALETTE)]

            if kind == "throughput":
                add(f"{tag}output tok/s", [(lx(s), s["output_tokens_per_s"]) for s in steps],
                    next_colour())
                marks = [(lbl, (lx(s), s["output_tokens_per_s"])) for lbl, s in _marks(rep)]
            elif kind == "ttft":
                if not colour_per_report:
                    add(f"{tag}TTFT p50", [(lx(s), _ms(s["ttft_s"]["p50"])) for s in steps],
                        next_colour())
                add(f"{tag}TTFT p95", [(lx(s), _ms(s["ttft_s"]["p95"])) for s in steps],
                    next_colour())
                marks = [(lbl, (lx(s), _ms(s["ttft_s"]["p95"]))) for lbl, s in _marks(rep)]
            else:
                add(f"{tag}TTFT p95", [(s["output_tokens_per_s"], _ms(s["ttft_s"]["p95"]))
                                       for s in steps], next_colour())
                marks = [(lbl, (s["output_tokens_per_s"], _ms(s["ttft_s"]["p95"])))
                         for lbl, s in _marks(rep)]
            pending += [(name, lbl, pt) for lbl, pt in marks]
            sla = rep.get("sla_boundary") or {}
            slo = slo or (sla.get("slo") or {}).get("ttft") or \
                (rep.get("options") or {}).get("ttft_slo")
            slo_label = slo_text(sla.get("slo") or {"ttft": slo})
        if colour_per_report and multi:
            ys = [pt[1] for _c, pts in plotted for pt in pts]
            ys += [slo * 1000] if slo and kind != "throughput" else []  # the axis reaches it
            xs_here = [pt[0] for _c, pts in plotted for pt in pts]
            names_of = _shared_labels(pending, _span(xs_here), _span(ys))
        for name, lbl, pt in pending:
            knee = lbl.startswith("knee")
            shared = names_of.get(id(pt), [])
            who = ("both" if len(names) == 2 else "all") if len(shared) == len(names) > 1 \
                else ", ".join(shared) if len(shared) <= 2 else f"{len(shared)} engines"
            shown = f"{who}: {lbl}" if shared else ("" if multi and colour_per_report else lbl)
            add(f"{name}: {lbl}" if multi else lbl, [{"value": pt, "label": shown}],
                KNEE_COLOUR if knee else SLA_COLOUR, stroke=False, dots_size=11 if knee else 7)
        if slo and kind != "throughput":
            if kind == "ttft":
                span = [min(xs, default=0.0), max(xs, default=1.0) + room[0]]
            else:
                span = [0.0, max(tps_all, default=1.0) * room[1]]
            add(f"SLO: {slo_label}", [(span[0], slo * 1000), (span[1], slo * 1000)],
                SLO_COLOUR, show_dots=False, stroke_style={"width": 3, "dasharray": "10, 5"})
        chart.style = _style(colours)
        n = len(chart.raw_series)
        chart.height = 420 + 24 * math.ceil(n / 2)
        # pygal sizes a bottom legend as n // columns rows: an odd count loses its last row
        chart.margin_bottom = 20 + (24 if n % 2 else 0)
        out[kind] = chart.render(is_unicode=True)
    return out


def scatter_chart(title: str, x_title: str, y_title: str,
                  series: Sequence[tuple[str, list[tuple[float, float, str]]]]) -> str:
    """One XY chart as SVG text: each series a list of (x, y, label) points (the tuner's
    Pareto fronts); the style and offline rules of the probe charts."""
    import pygal

    chart = pygal.XY(title=title, js=[], disable_xml_declaration=True, width=800, height=480,
                     legend_at_bottom=True, x_title=x_title, y_title=y_title, dots_size=4,
                     print_labels=True, truncate_legend=-1, stroke=False,
                     style=_style(list(PALETTE)))
    xs = [x for _n, pts in series for x, _y, _l in pts]
    ys = [y for _n, pts in series for _x, y, _l in pts]
    if xs:  # a margin round the points: none sits on an axis, no label on a tick's text
        chart.xrange, chart.range = _padded(xs), _padded(ys)
    for name, pts in series:
        chart.add(name, [{"value": (x, y), "label": label} for x, y, label in pts])
    return str(chart.render(is_unicode=True))


def _padded(values: Sequence[float], share: float = 0.1) -> tuple[float, float]:
    """(low, high) of ``values`` widened by ``share`` of their span each side (of the
    value itself when they are all equal), never below 0 for values that are not."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * share or abs(hi) * share or 1.0
    low = lo - pad
    return (max(0.0, low) if lo >= 0 else low), hi + pad
