"""One self-contained HTML page per probe report (or comparison): the capacity sentence,
the charts (inline SVG), the step table and where the load came from. No external
stylesheet, script, font or image: it opens offline."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmtop.loadgen.report import (
    capacity,
    honesty_lines,
    knee_text,
    lengths_lines,
    load_text,
    slo_text,
    unmet_sla_text,
)
from llmtop.report.charts import CHARTS, render_charts
from llmtop.units import DASH
from llmtop.units import pct_change as _pct

__all__ = ["html_report", "page", "steps_table", "write_charts"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.answer{font-size:1.15em;font-weight:600;background:#f3f7fb;padding:.7em 1em;
border-left:4px solid #1f77b4}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}
th,td{padding:.25em .6em;text-align:right;border-bottom:1px solid #ddd}
th{background:#f5f5f5}td.l,th.l{text-align:left}.bound{color:#b00}
.chart svg{max-width:100%;height:auto}.dim{color:#666;font-size:.9em}
"""
_COLS = ("step", "load", "achieved", "req/s", "out tok/s", "goodput/s", "TTFT p50 ms",
         "TTFT p95 ms", "ITL p50 ms", "E2E p95 s", "errors", "client")


def _e(v: Any) -> str:
    return html.escape(str(v))


def _n(v: float | None, digits: int = 1, scale: float = 1.0) -> str:
    return DASH if v is None else f"{v * scale:,.{digits}f}"


def steps_table(report: dict[str, Any]) -> str:
    """One probe report's steps as an HTML table (``*`` = partial step)."""
    rows = ["<table><tr>" + "".join(f"<th>{_e(c)}</th>" for c in _COLS) + "</tr>"]
    for s in report.get("steps", []):
        errs = sum((s.get("errors") or {}).values())
        bound = '<td class="bound">client-bound</td>' if s.get("client_bound") else "<td>ok</td>"
        cells = [f"{s.get('index')}{'*' if s.get('partial') else ''}", load_text(s),
                 _n(s.get("achieved_concurrency")), _n(s.get("requests_per_s"), 2),
                 _n(s.get("output_tokens_per_s"), 0), _n(s.get("goodput_per_s"), 2),
                 _n(s["ttft_s"]["p50"], 0, 1000), _n(s["ttft_s"]["p95"], 0, 1000),
                 _n(s["itl_s"]["p50"], 1, 1000), _n(s["e2e_s"]["p95"], 2), str(errs)]
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + bound + "</tr>")
    rows.append("</table><p class='dim'>* = partial step</p>")
    return "\n".join(rows)


def _verdicts(report: dict[str, Any]) -> list[str]:
    out = []
    sat, mx, sla = (report.get("saturation"), report.get("max_throughput"),
                    report.get("sla_boundary"))
    if sat:
        out.append(f"Saturation point (knee): {load_text(sat)} (fitted knee at "
                   f"{knee_text(sat)}), {sat['output_tokens_per_s']:,.0f} output tok/s")
    if mx:
        out.append(f"Max throughput: {mx['output_tokens_per_s']:,.0f} output tok/s at "
                   f"{load_text(mx)}")
    if sla:
        out.append(f"SLA boundary: {load_text(sla) if sla.get('met') else unmet_sla_text(report)} "
                   f"(SLO: {slo_text(sla.get('slo'))})")
    if any(s.get("client_bound") for s in report.get("steps", [])):
        out.append("Some steps were client-bound: the client, not the server, was the "
                   "limit there.")
    out += honesty_lines(report)
    out.append(f"stop reason: {report.get('stop_reason')}")
    return out


def _charts_html(reports: Sequence[dict[str, Any]], names: Sequence[str] | None) -> str:
    svgs = render_charts(reports, names)
    return "\n".join(f"<div class='chart'>{svgs[k]}</div>" for k in CHARTS)


def _comparison_html(comparison: dict[str, Any]) -> str:
    parts = ["<h2>Comparison</h2>"]
    for c in comparison["comparisons"]:
        parts.append(f"<p class='answer'>{_e(c['sentence'])}</p>")
        parts.append(f"<p class='dim'>A = {_e(comparison['baseline'])}, B = {_e(c['name'])}; "
                     "~ = interpolated between B's steps</p>")
        head = ("load", "out tok/s A", "out tok/s B", "change", "TTFT p95 A ms",
                "TTFT p95 B ms", "change")
        rows = ["<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
        for r in c["rows"]:
            mark = "~" if r["interpolated"] else ""
            (ta, tb), (la, lb) = r["tokens_per_s"], r["ttft_p95_s"]
            cells = [load_text({c["load_key"]: r[c["load_key"]]}), _n(ta, 0), _n(tb, 0) + mark,
                     _pct(r["tokens_change"]), _n(la, 0, 1000), _n(lb, 0, 1000) + mark,
                     _pct(r["ttft_change"])]
            rows.append("<tr>" + "".join(f"<td>{_e(x)}</td>" for x in cells) + "</tr>")
        parts.append("\n".join(rows) + "</table>")
    return "\n".join(parts)




def html_report(reports: Sequence[dict[str, Any]], names: Sequence[str] | None = None,
                comparison: dict[str, Any] | None = None) -> str:
    """The whole page as text."""
    names = list(names or [str(r.get("target")) for r in reports])
    title = "llmtop probe" + (" comparison" if comparison else f": {reports[0].get('target')}")
    body = [f"<h1>{_e(title)}</h1>"]
    if comparison:
        body.append(_comparison_html(comparison))
        body.append("<h2>Curves</h2>" + _charts_html(reports, names))
    for i, rep in enumerate(reports):
        if not comparison:
            body.append(f"<p class='answer'>{_e(capacity(rep)['sentence'])}</p>")
            body.append(_charts_html([rep], None))
        else:
            body.append(f"<h2>{_e(names[i])}</h2>"
                        f"<p class='answer'>{_e(capacity(rep)['sentence'])}</p>")
        body.append(f"<p class='dim'>model {_e(rep.get('model'))} ({_e(rep.get('endpoint'))}),"
                    f" started {_e(rep.get('started'))}</p>")
        body.append("<ul>" + "".join(f"<li>{_e(v)}</li>" for v in _verdicts(rep)) + "</ul>")
        body.append(steps_table(rep))
        lines = lengths_lines(rep)
        if lines:
            body.append("<ul>" + "".join(f"<li>{_e(v.strip())}</li>" for v in lines) + "</ul>")
    return page(title, body)


def page(title: str, body: Sequence[str], css: str = "") -> str:
    """A whole offline page: ``body`` (HTML fragments) under the shared style (+ ``css``)."""
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{_e(title)}</title><style>{_CSS}{css}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def write_charts(reports: Sequence[dict[str, Any]], *, html_path: str | None = None,
                 svg_prefix: str | None = None, names: Sequence[str] | None = None,
                 comparison: dict[str, Any] | None = None) -> list[str]:
    """Write ``--html FILE`` and/or ``--svg PREFIX-<chart>.svg``; returns the paths."""
    out = []
    if html_path:
        Path(html_path).write_text(html_report(reports, names, comparison), encoding="utf-8")
        out.append(html_path)
    if svg_prefix:
        for kind, svg in render_charts(reports, names).items():
            path = f"{svg_prefix}-{kind}.svg"
            Path(path).write_text('<?xml version="1.0" encoding="utf-8"?>\n' + svg,
                                  encoding="utf-8")
            out.append(path)
    return out
