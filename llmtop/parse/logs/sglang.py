"""SGLang's log lines (``configure_logger`` in ``sglang/srt/utils/common.py``, 0.5.23).

- ``[2026-12-07 09:25:41] message``, ``[2026-12-07 09:25:41.123 TP0] message`` (milliseconds
  with ``SGLANG_LOG_MS``; a rank prefix in the scheduler processes): local time with a year,
  **no level**. The message's own level word (Uvicorn's ``INFO:     ...``), a traceback or an
  exception line give the severity; else it is info.
- A traceback logged with the exception follows the prefixed line without the prefix (the
  standard ``logging`` format): the assembler's traceback rules join it.
- Request ids: ``rid='...'`` in ``--log-requests`` lines (``Receive:``, ``Finish:``).
"""

from __future__ import annotations

import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_PREFIX = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?)(?: [^\]]*)?\] ")
_RID = re.compile(r"\brid='([^']+)'")
_ERROR_WORDS = re.compile(r"(?i)\b(?:hit an exception|exception:|traceback \(most recent)")


def parse(text: str, ref: float) -> Parsed:
    """One line of an SGLang log."""
    m = _PREFIX.match(text)
    if m is None:
        return generic.parse(text, ref)
    inner = generic.parse(text[m.end():], ref)
    if inner.severity is None and _ERROR_WORDS.search(inner.body):
        inner.severity = "error"
    inner.t_wall = stamps.iso(m.group(1))
    if "rid=" in inner.body:
        r = _RID.search(inner.body)
        inner.request_id = r.group(1) if r is not None else None
    return inner
