"""Rich output of ``llmtop tune``: the ranked table of trials (limiter and evidence per
trial, skipped ones with their reason), then the recommended start command whole.
Missing values are ``–``. Text from ``llmtop.tune.summary``, shared with the CSV and HTML."""

from __future__ import annotations

from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table

from llmtop.tune.summary import COLUMNS, table_rows, trial_port_text

__all__ = ["print_tune", "tune_table"]


def tune_table(report: dict[str, Any]) -> Table:
    """The ranked trials as a rich table."""
    t = Table(box=box.SIMPLE_HEAD, title=f"llmtop tune: {report['objective']} "
              f"({report['strategy']} search)", title_justify="left")
    for key, head in COLUMNS:
        t.add_column(head, justify="right" if key in ("rank", "goodput", "tok_s", "ttft95",
                                                      "cost", "cold") else "left",
                     overflow="fold")
    for row in table_rows(report):
        style = "dim" if row["status"].startswith("skipped") else None
        t.add_row(*(row[k] for k, _ in COLUMNS), style=style)
    return t


def print_tune(report: dict[str, Any], file: IO[str] | None = None) -> None:
    """Print the table, the best configuration and the warnings."""
    con = Console(file=file, width=None if file is None else 10_000, highlight=False)
    if file is None and not con.is_terminal:
        con = Console(width=10_000, highlight=False)
    con.print(tune_table(report))
    best = report.get("best")
    if best:
        con.print(f"Recommended: {best['why']}")
        con.print(f"Start command: {best['command']}", soft_wrap=True)
        port = trial_port_text(best)
        if port:
            con.print(f"({port})", soft_wrap=True)
    else:
        con.print("No configuration met the SLOs at any load tried.")
    tr = report.get("traffic") or {}
    con.print(f"Traffic: {tr.get('prompt_tokens')} prompt / {tr.get('output_tokens')} output "
              f"tokens, seed {tr.get('seed')}; request lists sha256 {tr.get('hash') or '–'}"
              f"{'' if tr.get('identical') in (None, True) else ' (NOT identical)'}",
              soft_wrap=True)
    for w in report.get("warnings") or []:
        con.print(f"warning: {w}", style="yellow", soft_wrap=True)
