"""Findings cite the engine's own log lines.

- ``errors`` and ``stuck`` (``LOG_CITES``) name the error lines of the engine's log in the
  diagnosis window as evidence (``log``: time and headline, the newest ``CITE_LOG_LINES``)
  and the newest in their summary; without error lines, its warnings; without either,
  nothing (the finding is unchanged).
- ``carry``: a finding that goes on keeps the lines cited at its start (the lines around
  the moment it began), unless it had none then.
- The events are passed in as data (``diagnose(..., logs=...)``: the store's kept events over
  the window, ``--once``, replay). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmtop.diagnose.findings import Evidence, Finding
from llmtop.history.logs import clock_text, headline_text, is_error
from llmtop.model.logs import LogEvent

__all__ = ["CITE_LOG_LINES", "LOG_CITES", "LOG_SIGNAL", "carry", "cite_log"]

LOG_CITES = frozenset({"errors", "stuck"})
"""Rules whose findings cite the engine's log lines."""

CITE_LOG_LINES = 3
"""Log lines cited as evidence, at most (the newest)."""

LOG_SIGNAL = "log"
"""The evidence signal of a cited line (its value: ``04:47:19 <headline>``)."""

_MARK = "; log: "


def cite_log(f: Finding, events: Sequence[LogEvent], window: str) -> Finding:
    """``f`` with the engine's log lines cited (see the module doc) where it is one of
    ``LOG_CITES`` and ``events`` (the window's, oldest first) hold any worth citing."""
    if f.rule not in LOG_CITES or not events:
        return f
    picked = [e for e in events if is_error(e)] or [e for e in events
                                                   if e.severity == "warning"]
    if not picked:
        return f
    n = len(picked)
    picked = picked[-CITE_LOG_LINES:]
    ev = [Evidence(LOG_SIGNAL, f"{clock_text(e.t_wall)} {headline_text(e)}", window)
          for e in picked]
    more = f" (+{n - 1} more)" if n > 1 else ""
    text = f"{_MARK}{headline_text(picked[-1])}{more}"
    return replace(f, summary=f"{f.summary}{text}", evidence=(*f.evidence, *ev))


def _split(f: Finding) -> tuple[str, str, tuple[Evidence, ...], tuple[Evidence, ...]]:
    head, mark, tail = f.summary.partition(_MARK)
    logs = tuple(e for e in f.evidence if e.signal == LOG_SIGNAL)
    rest = tuple(e for e in f.evidence if e.signal != LOG_SIGNAL)
    return head, mark + tail, rest, logs


def carry(old: Finding, new: Finding) -> Finding:
    """``new`` (the same finding, fired again) with ``old``'s cited log lines: those around
    the finding's start; ``new`` as it is when ``old`` cited none."""
    _, old_text, _, old_logs = _split(old)
    if not old_logs:
        return new
    head, _, rest, _ = _split(new)
    return replace(new, summary=f"{head}{old_text}", evidence=(*rest, *old_logs))
