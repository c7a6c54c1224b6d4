"""``--once`` text: a line per engine whose log has errors in the window, or cannot be read.

- ``  vllm@127.0.0.1:8000 log: 2 errors in the window (/var/log/vllm.log) · last 04:47:19
  vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. ...``;
- ``  vllm@127.0.0.1:8000 log: not read: /proc/4711/fd/1 is a terminal ...`` (the finder's or
  the follower's reason, so a one-shot user learns why there is no log line);
- engines whose log has no error, or whose log is not followed, get no line. Plain strings
  (the caller styles them).
"""

from __future__ import annotations

from llmtop.history.logs import clock_text, headline_text
from llmtop.model import Snapshot

__all__ = ["log_lines"]


def log_lines(snap: Snapshot) -> list[str]:
    """One line per target with error or critical log events in the window, or with a log
    that cannot be read (and why)."""
    out: list[str] = []
    seen: set[str] = set()
    for row in snap.engines:
        log = row.log
        if row.target in seen or log is None:
            continue
        seen.add(row.target)
        why = log.location.error if log.location is not None else None
        if why:
            out.append(f"  {row.target} log: not read: {why}")
            continue
        n = log.counts.get("error", 0) + log.counts.get("critical", 0)
        if n <= 0:
            continue
        where = f" ({log.location.label})" if log.location is not None else ""
        line = f"  {row.target} log: {n} error{'s' if n != 1 else ''} in the window{where}"
        last = log.last_error
        if last is not None:
            line += f" · last {clock_text(last.t_wall)} {headline_text(last)}"
        out.append(line)
    return out
