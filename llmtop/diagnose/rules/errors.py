"""``errors`` (the server fails requests) and ``aborts`` (clients give up: info only)."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.signals import finished_total
from llmtop.diagnose.thresholds import (
    ABORT_SHARE_INFO,
    ERROR_SHARE_CRIT,
    ERROR_SHARE_WARN,
    ERRORS_MIN,
    MIN_REQUESTS,
)

__all__ = ["aborts", "errors"]


def _counts(c: RowCtx, reason: str, rate: float | None) -> tuple[float, float] | None:
    """(requests of ``reason``, all requests) finished in the window; None if unknown."""
    row = c.row
    total = finished_total(row)
    n = row.finished.get(reason) if row.finished else None
    if n is None and rate is not None and row.requests_per_s is not None:
        n, total = rate * c.window_s, row.requests_per_s * c.window_s
    if n is None or total is None:
        return None
    return n, total


def errors(c: RowCtx) -> list[Finding]:
    """Share of requests finished with an error above ERROR_SHARE_WARN (enough requests)."""
    got = _counts(c, "error", c.row.errors_per_s)
    if got is None:
        return []
    n, total = got
    if total < MIN_REQUESTS or n < ERRORS_MIN:
        return []
    share = n / total
    if share < ERROR_SHARE_WARN:
        return []
    ev = [Evidence("error_share", share, c.window, None, ERROR_SHARE_WARN),
          Evidence("errors", n, c.window, None, ERRORS_MIN),
          Evidence("requests", total, c.window, None, MIN_REQUESTS)]
    summary = f"{fmt_pct(share)} of requests fail ({n:.0f} of {total:.0f} in {c.window})"
    action = "read the engine's log for the failing requests' error; a restart may follow"
    return [c.finding("errors", "critical" if share >= ERROR_SHARE_CRIT else "warn", summary,
                      ev, action)]


def aborts(c: RowCtx) -> list[Finding]:
    """A high share of aborted requests: clients disconnect or time out (context, info)."""
    got = _counts(c, "abort", None)
    if got is None:
        return []
    n, total = got
    if total < MIN_REQUESTS or n / total < ABORT_SHARE_INFO:
        return []
    share = n / total
    summary = (f"{fmt_pct(share)} of requests aborted ({n:.0f} of {total:.0f}): clients "
               "disconnect or time out, usually because they see the latency")
    ev = [Evidence("abort_share", share, c.window, None, ABORT_SHARE_INFO)]
    return [c.finding("aborts", "info", summary, ev,
                      "compare the clients' timeout with TTFT/E2E p95")]
