"""vLLM's log lines (``vllm/logger.py``, ``vllm/logging_utils/formatter.py`` in 0.32).

- Text: ``(APIServer pid=20852) ERROR 12-07 04:47:19 [async_llm.py:906] message``: process
  and pid, level, ``MM-DD HH:MM:SS`` local time with no year, ``[file:line]`` (a shortened
  path at DEBUG), then the message. ``VLLM_LOGGING_PREFIX`` may come first. A multi-line
  message repeats the prefix on each line, every line but the last ending in a carriage
  return (``NewLineFormatter``): those lines are one event (the key is the whole prefix).
- JSON (``--logging-config.formatter json``, python-json-logger): ``asctime`` (with year,
  ``2026-12-07 09:22:56,914``), ``levelname``, ``name``, ``process``, ``message``, and
  ``exc_info`` (the traceback text) on an exception.
- Uvicorn's own lines (``INFO:     Shutting down``, access lines) and anything else without
  the prefix: the generic parser.
- Request ids: ``Received request <id>:``, ``Added request <id>.``, ``Request <id> failed``,
  ``Request <id> details:``, ``Generated response <id>``, ``Aborted request <id>``.
"""

from __future__ import annotations

import json
import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_PREFIX = re.compile(
    r"(?P<proc>\([^()]* pid=\d+\)) (?P<level>[A-Z]+) "
    r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) "
    r"\[(?P<where>[^\]]+:\d+)\] ?")
_REQUEST = re.compile(
    r"(?:Received request|Added request|Aborted request|Generated response|Request) "
    r"([A-Za-z0-9][\w.:-]*?)(?=[:.,]?\s|[:.]?$| \()")


def _request_id(body: str) -> str | None:
    if "equest" not in body and "response" not in body:
        return None
    m = _REQUEST.search(body)
    return m.group(1) if m is not None else None


def _json(text: str, ref: float) -> Parsed | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or "levelname" not in obj or "message" not in obj:
        return None
    message = str(obj.get("message"))
    lines = message.split("\n")
    exc = obj.get("exc_info")
    if isinstance(exc, str) and exc:
        lines += exc.split("\n")
    asctime = obj.get("asctime")
    return Parsed(body=lines[0], severity=generic.level(str(obj.get("levelname"))),
                  t_wall=stamps.iso(asctime) if isinstance(asctime, str) else None,
                  request_id=_request_id(message), extra=tuple(lines[1:]))


def parse(text: str, ref: float) -> Parsed:
    """One line of a vLLM log (text or JSON formatter, or an unprefixed line)."""
    if text.startswith("{"):
        parsed = _json(text, ref)
        if parsed is not None:
            return parsed
    pid = text.find(" pid=")
    m = _PREFIX.match(text, text.rfind("(", 0, pid)) if pid > 0 else None
    if m is None:
        return generic.parse(text, ref)
    mo, d, h, mi, s = (int(g) for g in m.group("mo", "d", "h", "mi", "s"))
    body = text[m.end():]
    return Parsed(
        body=body,
        severity=generic.LEVELS.get(m.group("level")),
        t_wall=stamps.no_year(mo, d, h, mi, s, 0.0, ref),
        key=(text[: m.end()].rstrip(),),  # process, level, stamp and file:line
        request_id=_request_id(body),
    )
