"""Bake-off files: ``--csv`` (one row per engine x level) and ``--html`` (one offline page).

The HTML page: the comparison table (best of each row marked), the curves of all engines
overlaid (output tok/s vs load, TTFT p95 vs load, TTFT p95 vs output tok/s; each engine's
knee and SLA boundary marked; ``llmtop.report.charts``), then per engine its summary lines
and step table. No script, stylesheet, font or image is fetched: it opens offline.
``write_csv`` needs nothing extra; ``write_html`` needs pygal (``charts_available()``).
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path
from typing import Any

from llmtop.loadgen.bakeoff_summary import (
    METRICS,
    engine_lines,
    engine_name,
    engine_what,
    table_rows,
    traffic_text,
)
from llmtop.loadgen.report import CSV_COLUMNS, to_csv

__all__ = ["CSV_ENGINE_COLUMNS", "bakeoff_html", "to_csv_text", "write_csv", "write_html"]

CSV_ENGINE_COLUMNS = ("engine_index", "name", "url", "engine", "engine_version", "comparable",
                      "error")
"""The columns before each row's step columns (``llmtop.loadgen.report.CSV_COLUMNS``)."""

_CSS = """
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:.5em 1em}
.err{background:#fdecea;border-left:4px solid #c00;padding:.5em 1em;color:#900}
td.best{font-weight:700;color:#176b1f;background:#eaf6ec}
table.bakeoff th.eng{text-align:center;border-left:2px solid #bbb}
table.bakeoff td.first,table.bakeoff th.first{border-left:2px solid #bbb}
dl.eng{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;margin:.5em 0}
dl.eng dt{color:#666}dl.eng dd{margin:0}
div.wide{overflow-x:auto}
pre.log{background:#f6f6f6;padding:.5em;font-size:.85em;overflow-x:auto}
"""


def _e(v: Any) -> str:
    return html.escape(str(v))


def to_csv_text(report: dict[str, Any]) -> str:
    """One row per engine x level: the engine columns, then the probe's step columns (the
    same as ``llmtop probe --csv``). An engine with no step gets one row with its error."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    rows: list[list[Any]] = []
    for i, e in enumerate(report.get("endpoints") or []):
        comparable = e.get("comparable")
        head = [i, engine_name(e, i), e.get("url") or "", e.get("engine") or "",
                e.get("engine_version") or "", "" if comparable is None else comparable,
                e.get("error") or ""]
        lines = list(csv.reader(io.StringIO(to_csv({"steps": e.get("steps") or []}))))
        if len(lines) == 1:
            rows.append([*head, *([""] * len(CSV_COLUMNS))])
        rows.extend([*head, *ln] for ln in lines[1:])
    w.writerow([*CSV_ENGINE_COLUMNS, *CSV_COLUMNS])
    w.writerows(rows)
    return buf.getvalue()


def write_csv(report: dict[str, Any], path: str) -> str:
    """Write ``to_csv_text`` to ``path``; returns the path."""
    Path(path).write_text(to_csv_text(report), encoding="utf-8")
    return path


def _table(report: dict[str, Any]) -> str:
    eps = report.get("endpoints") or []
    rows = table_rows(report)
    if not rows:
        return "<p class='warn'>No engine finished a step: no table.</p>"
    out = ["<div class='wide'><table class='bakeoff'><tr><th></th>"
           + "".join(f"<th class='eng' colspan='{len(METRICS)}'>{_e(engine_name(e, i))}</th>"
                     for i, e in enumerate(eps)) + "</tr>",
           "<tr><th class='l'>load</th>"
           + "".join(f"<th{' class=first' if m == 0 else ''}>{_e(h)}</th>"
                     for _e_ in eps for m, (_k, h, _l, _f) in enumerate(METRICS)) + "</tr>"]
    for r in rows:
        cells = [f"<td class='l'>{_e(r['load'])}</td>"]
        for c in r["engines"]:
            for m, (k, *_rest) in enumerate(METRICS):
                cls = (["first"] if m == 0 else []) + (["best"] if k in c["best"] else [])
                text = c["text"][k]
                if c["values"][k] is not None and k == "tps":
                    text += ("!" if c["not_comparable"] else "") + ("~" if c["partial"] else "")
                if k in c["best"]:
                    text += "*"
                attr = f" class='{' '.join(cls)}'" if cls else ""
                cells.append(f"<td{attr}>{_e(text)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table></div><p class='dim'>latencies in ms; * = best in the row; ! = not "
               "comparable (outputs ended early); ~ = partial step; \u2013 = not measured</p>")
    return "\n".join(out)


def _engine_section(e: dict[str, Any], i: int) -> str:
    from llmtop.report.html import steps_table

    parts = [f"<h2>{_e(engine_name(e, i))} <span class='dim'>{_e(engine_what(e))} "
             f"{_e(e.get('url') or '')}</span></h2>"]
    lines = engine_lines(e)
    for label, text in lines:
        if label == "error":
            parts.append(f"<p class='err'>error: {_e(text)}</p>")
        elif label == "capacity":
            parts.append(f"<p class='answer'>{_e(text)}</p>")
    tail = [v for k, v in lines if k == "log tail"]
    if tail:
        parts.append(f"<pre class='log'>{_e(chr(10).join(tail))}</pre>")
    rest = [(k, v) for k, v in lines if k not in ("error", "capacity", "log tail")]
    if rest:
        parts.append("<dl class='eng'>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>"
                                                  for k, v in rest) + "</dl>")
    parts.extend(f"<p class='warn'>{_e(w)}</p>" for w in e.get("warnings") or [])
    if e.get("steps"):
        parts.append(steps_table(e))
    return "\n".join(parts)


def bakeoff_html(report: dict[str, Any]) -> str:
    """The whole page as text."""
    from llmtop.report.charts import CHARTS, render_charts
    from llmtop.report.html import page

    eps = report.get("endpoints") or []
    title = "llmtop bake-off: " + ", ".join(engine_name(e, i) for i, e in enumerate(eps))
    body = [f"<h1>{_e(title)}</h1>", f"<p class='dim'>{_e(traffic_text(report))}</p>"]
    body += [f"<p class='warn'>{_e(w)}</p>" for w in report.get("warnings") or []]
    body += [f"<p class='err'>{_e(engine_name(e, i))} failed: {_e(e['error'])}</p>"
             for i, e in enumerate(eps) if e.get("error")]
    body.append(_table(report))
    drawn = [(engine_name(e, i), e) for i, e in enumerate(eps)
             if any(s.get("requests") and not s.get("partial") for s in e.get("steps") or [])]
    if drawn:
        svgs = render_charts([e for _n, e in drawn], [n for n, _e in drawn],
                             colour_per_report=True)
        body.append("<h2>Curves</h2>")
        body += [f"<div class='chart'>{svgs[k]}</div>" for k in CHARTS]
    body += [_engine_section(e, i) for i, e in enumerate(eps)]
    return page(title, body, _CSS)


def write_html(report: dict[str, Any], path: str) -> str:
    """Write ``bakeoff_html`` to ``path``; returns the path."""
    Path(path).write_text(bakeoff_html(report), encoding="utf-8")
    return path

