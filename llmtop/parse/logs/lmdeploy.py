"""LMDeploy's log lines (``get_logger`` and ``_FORMAT`` in ``lmdeploy/utils.py``).

- ``2026-12-07 09:30:00,123 - lmdeploy - INFO - api_server.py:120 - message``: local time with
  a year, logger name, level (``REQUEST`` is LMDeploy's own, between DEBUG and INFO: info
  here), file:line, message; ``LMDEPLOY_LOG_PID`` adds ``[pid=N ppid=N] - `` before the file.
  A traceback (``logger.exception``) follows unprefixed: the assembler's traceback rules.
- Anything else (Uvicorn's lines): the generic parser.
"""

from __future__ import annotations

import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_PREFIX = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3})?) - (\S+) - ([A-Z]+) - "
    r"(?:\[pid=\d+ ppid=\d+\] - )?\S+:\d+ - ")


def parse(text: str, ref: float) -> Parsed:
    """One line of an LMDeploy log."""
    m = _PREFIX.match(text)
    if m is None:
        return generic.parse(text, ref)
    return Parsed(body=text[m.end():], severity=generic.level(m.group(3)) or "info",
                  t_wall=stamps.iso(m.group(1)))
