"""Rich output of a bake-off (``llmtop probe URL1 URL2 ...``): the table the articles print,
then a block per engine.

The table: one row per load level, per engine output tok/s, TTFT p50 / p95, ITL p95 and
errors; ``*`` marks the best value of a row (bold green on a colour terminal, and the ``*``
without colour too). On a pipe or in a file nothing is cut; on a terminal narrower than the
whole table the engines are split into stacked tables, each as wide as the terminal allows.
Missing values are ``–``, never 0. Fed only with the report dict (the bake-off JSON); the
text comes from ``llmtop.loadgen.bakeoff_summary``, shared with the CSV and HTML reports.
"""

from __future__ import annotations

import io
from typing import IO, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmtop.loadgen.bakeoff_summary import (
    METRICS,
    engine_lines,
    engine_name,
    engine_what,
    levels,
    table_rows,
    traffic_text,
)

__all__ = ["BEST", "bakeoff_tables", "print_bakeoff"]

WIDE = 10_000
"""Width of a non-terminal console: no table or line is ever cut."""
BEST = "*"
"""Appended to the best value of a row (also without colour)."""
HEADERS = {"tps": "out\ntok/s", "ttft50": "TTFT\np50", "ttft95": "TTFT\np95",
           "itl95": "ITL\np95", "errors": "\nerr"}
CAPTION = (f"latencies in ms; {BEST} = best in the row (of all engines); ! = not comparable "
           "(outputs ended early); ~ = partial step; \u2013 = not measured")


def _cell(cell: dict[str, Any], key: str) -> Text:
    t = Text(cell["text"][key])
    if cell["values"][key] is None:
        return t
    if key == "tps" and cell["not_comparable"]:
        t.append("!", style="yellow")
    if key == "tps" and cell["partial"]:
        t.append("~")
    if key in cell["best"]:
        t.stylize("bold green")
        t.append(BEST, style="bold green")
    elif key == "errors" and cell["values"][key]:
        t.stylize("red")
    return t


def _part(title: Text | str, style: str) -> Table:
    """One engine's columns (or the load column) as a table under its own title line: the
    title spans exactly its columns (the table is at least as wide as it), and every part has
    the same rows, so they line up."""
    return Table(header_style=style, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
                 collapse_padding=True, title=title, title_justify="center",
                 title_style=style, show_edge=False, min_width=cell_len(str(title)))


def _table(report: dict[str, Any], idx: list[int], rows: list[dict[str, Any]]) -> Table:
    eps = report.get("endpoints") or []
    grid = Table.grid(padding=(0, 2))
    load = _part(" ", "bold")
    load.add_column("\nload", justify="right", no_wrap=True)
    for r in rows:
        load.add_row(r["load"])
    parts = [load]
    for j, i in enumerate(idx):
        style = "bold cyan" if j % 2 else "bold"
        # the name stays on one line (a cut name on a narrow terminal, never on a pipe)
        part = _part(Text(engine_name(eps[i], i), no_wrap=True, overflow="ellipsis"), style)
        for key, *_rest in METRICS:
            part.add_column(HEADERS[key], justify="right", no_wrap=True)
        for r in rows:
            part.add_row(*(_cell(r["engines"][i], key) for key, *_rest in METRICS))
        parts.append(part)
    for _ in parts:
        grid.add_column(no_wrap=True)
    grid.add_row(*parts)
    return grid


def bakeoff_tables(report: dict[str, Any], width: int | None = None) -> list[Table]:
    """The comparison table, split into stacked tables of as many engines as fit ``width``
    (None: one table, however wide). Empty when no engine has a level."""
    n = len(report.get("endpoints") or [])
    rows = table_rows(report)
    if n == 0 or not rows:
        return []
    if width is None:
        return [_table(report, list(range(n)), rows)]
    measure = Console(width=WIDE, file=io.StringIO())
    for k in range(n, 1, -1):
        groups = [list(range(a, min(a + k, n))) for a in range(0, n, k)]
        tables = [_table(report, g, rows) for g in groups]
        if all(measure.measure(t).maximum <= width for t in tables):
            return tables
    return [_table(report, [i], rows) for i in range(n)]


def _engine_head(e: dict[str, Any], i: int) -> Text:
    head = Text(engine_name(e, i), style="bold")
    head.append(f"  {engine_what(e)}  {e.get('url') or ''}".rstrip(), style="dim")
    if e.get("error"):
        head.append("  FAILED", style="bold red")
    return head


def print_bakeoff(report: dict[str, Any], file: IO[str] | None = None) -> None:
    """The traffic line, the table(s), a block per engine, then the report's warnings."""
    console = Console(file=file)
    width: int | None = console.width
    if not console.is_terminal:
        console = Console(file=console.file, width=WIDE, color_system=None, highlight=False,
                          soft_wrap=True)
        width = None
    eps = report.get("endpoints") or []
    console.print(Text(f"llmtop bake-off · {len(eps)} engine{'s' if len(eps) != 1 else ''}",
                       style="bold"))
    console.print(Text(traffic_text(report), style="dim"))
    if not levels(report):
        console.print(Text("No engine finished a step: no table.", style="yellow"))
    tables = bakeoff_tables(report, width)
    for n, t in enumerate(tables):
        if n:
            console.print()
        console.print(t)
    if tables:
        console.print(Text(CAPTION, style="dim italic"))
    for i, e in enumerate(eps):
        console.print()
        console.print(_engine_head(e, i))
        for label, text in engine_lines(e):
            if label == "log tail":
                console.print(Text(f"    | {text}", style="dim"))
                continue
            bad = label == "error"
            console.print(Text.assemble((f"  {label}: ", "bold red" if bad else "dim"),
                                        (text, "red" if bad else "")))
        for w in e.get("warnings") or []:
            console.print(Text(f"  warning: {w}", style="yellow"))
    for w in report.get("warnings") or []:
        console.print(Text(f"warning: {w}", style="yellow"))
    console.print()
