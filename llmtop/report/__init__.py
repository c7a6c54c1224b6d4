"""Probe reports with charts: ``--html`` (one self-contained page) and ``--svg`` (charts alone).

Charts are drawn by pygal (a dependency of llmtop-tui); ``charts_available()`` says what to
install should it be missing. ``llmtop.loadgen`` never imports this package.
"""

from __future__ import annotations

from llmtop.report.charts import CHARTS, charts_available

__all__ = ["CHARTS", "charts_available", "write_charts"]


def write_charts(*args, **kwargs):  # type: ignore[no-untyped-def]
    """``llmtop.report.html.write_charts`` (imported on first use; it needs pygal)."""
    from llmtop.report.html import write_charts as _write

    return _write(*args, **kwargs)
