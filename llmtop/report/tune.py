"""Tune files: ``--csv`` (one row per trial) and ``--html`` (one offline page: the ranked
table, the recommended command, the Pareto fronts of output tok/s per GPU against TTFT p95
and against $/1M tokens, and each trial's levels). Nothing is fetched: it opens offline.
``write_html`` needs pygal (``charts_available()``)."""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path
from typing import Any

from llmtop.tune.limiter import is_rate, load_text
from llmtop.tune.summary import COLUMNS, table_rows, trial_port_text

__all__ = ["to_csv_text", "tune_html", "write_csv", "write_html"]

_CSS = """
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:.5em 1em}
pre.cmd{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
tr.skipped td{color:#888}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def to_csv_text(report: dict[str, Any]) -> str:
    """The table as CSV (text cells; ``–`` where nothing was measured)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["trial", *(k for k, _ in COLUMNS), "command", "trial_port"])
    for row in table_rows(report):
        w.writerow([row["index"], *(row[k] for k, _ in COLUMNS), row["command"],
                    row["trial_port"]])
    return buf.getvalue()


def write_csv(report: dict[str, Any], path: str) -> str:
    """Write ``to_csv_text`` to ``path``; returns the path."""
    Path(path).write_text(to_csv_text(report), encoding="utf-8")
    return path


def _fronts(report: dict[str, Any]) -> list[str]:
    from llmtop.report.charts import scatter_chart

    trials = report["trials"]
    out = []
    for key, cost, axis, scale in (("ttft", "ttft_p95_s", "TTFT p95 (ms)", 1000.0),
                                   ("cost", "cost_per_mtok_usd", "$ per 1M output tokens", 1.0)):
        pts = [(i, (t.get("per_gpu") or {}).get("output_tok_s"), t.get(cost))
               for i, t in enumerate(trials)]
        pts = [(i, x, y * scale) for i, x, y in pts if x is not None and y is not None]
        if not pts:
            continue
        front = set((report.get("pareto") or {}).get(key) or [])
        name = _names(report)
        series = [("Pareto front", [(x, y, name[i]) for i, x, y in pts if i in front]),
                  ("other trials", [(x, y, name[i]) for i, x, y in pts if i not in front])]
        out.append(scatter_chart(f"Output tok/s per GPU vs {axis} (at the SLA boundary)",
                                 "output tok/s per GPU", axis, series))
    return out


def _names(report: dict[str, Any]) -> dict[int, str]:
    """Each trial as the table's ``#`` column names it: ``#rank`` for a ranked one, else
    ``trial N`` (its place in the plan, from 1): the charts and the trial sections too."""
    rank = {i: r + 1 for r, i in enumerate(report.get("ranking") or [])}
    return {i: f"#{rank[i]}" if i in rank else f"trial {i + 1}"
            for i in range(len(report["trials"]))}


def _levels(t: dict[str, Any], name: str) -> str:
    rows = "".join(
        f"<tr><td>{_e(load_text(lv['load'], is_rate(t)))}</td>"
        f"<td>{'yes' if lv['met'] else 'no'}</td>"
        + "".join(f"<td>{_e('–' if lv.get(k) is None else f'{lv[k] * s:.{d}f}')}</td>"
                  for k, s, d in (("output_tok_s", 1, 0), ("ttft_p95_s", 1000, 0),
                                  ("tpot_p95_s", 1000, 1), ("running_peak", 1, 0),
                                  ("waiting_peak", 1, 0), ("kv_peak", 100, 0),
                                  ("preemptions", 1, 0)))
        + f"<td>{_e(lv.get('errors', 0))}</td><td>{_e(lv.get('stopped_early') or '')}</td></tr>"
        for lv in t["levels"])
    params = ", ".join(f"{k}={v}" for k, v in t["params"].items())
    start = t.get("start")
    started = (f"<p>Started at {_e(load_text(start['load'], is_rate(t)))}, predicted: "
               f"{_e(start['predicted_from'])}</p>" if start else "")
    return (f"<h3>{_e(name)} {_e(params)}</h3><p>{_e(t.get('capacity') or '')}</p>{started}"
            "<table><tr><th>load</th><th>SLOs met</th><th>out tok/s</th><th>TTFT p95 ms</th>"
            "<th>TPOT p95 ms</th><th>running</th><th>waiting</th><th>KV %</th>"
            "<th>preemptions</th><th>errors</th><th>note</th></tr>" + rows + "</table>")


def tune_html(report: dict[str, Any]) -> str:
    """The whole page as text."""
    from llmtop.report.html import page

    title = f"llmtop tune: {report['objective']}"
    body = [f"<h1>{_e(title)}</h1>"]
    best = report.get("best")
    if best:
        body += [f"<p>{_e(best['why'])}</p>",
                 f"<pre class='cmd'>{_e(best['command'])}</pre>"]
        port = trial_port_text(best)
        if port:
            body.append(f"<p>{_e(port[0].upper() + port[1:])}.</p>")
    else:
        body.append("<p>No configuration met the SLOs at any load tried.</p>")
    body += [f"<p class='warn'>{_e(w)}</p>" for w in report.get("warnings") or []]
    head = "".join(f"<th>{_e(h)}</th>" for _k, h in COLUMNS)
    rows = "".join(
        f"<tr class='{_e(r['status'].split()[0])}'>"
        + "".join(f"<td>{_e(r[k])}</td>" for k, _h in COLUMNS) + "</tr>"
        for r in table_rows(report))
    body.append(f"<table class='tune'><tr>{head}</tr>{rows}</table>")
    charts = _fronts(report)
    if charts:
        body.append("<h2>Pareto fronts</h2>")
        body += [f"<div class='chart'>{c}</div>" for c in charts]
    body.append("<h2>Trials</h2>")
    name = _names(report)
    body += [_levels(t, name[i]) for i, t in enumerate(report["trials"]) if t["levels"]]
    return page(title, body, _CSS)


def write_html(report: dict[str, Any], path: str) -> str:
    """Write ``tune_html`` to ``path``; returns the path."""
    Path(path).write_text(tune_html(report), encoding="utf-8")
    return path
