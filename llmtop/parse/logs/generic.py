"""Any log line: a level word or letter, a leading stamp, Python tracebacks.

- Severity from a level at the start of the line (``ERROR``, ``WARNING:``, ``[warn]``,
  Uvicorn's ``INFO:     ``, PyTorch's ``[W1207 …]``), from a Python warning
  (``file.py:12: UserWarning: …``), or from a bare exception line (``torch.OutOfMemoryError:
  …``); a line with none is None (the assembler makes it info).
- Time from a leading ISO stamp (``2026-12-07 04:47:19,123``, ``[2026-12-07T04:47:19Z]``).
- A JSON object line with a level (``level``, ``levelname``, ``severity``) and a message
  (``message``, ``msg``) and perhaps a time (``time``, ``timestamp``, ``asctime``, ``ts``).
- ``TRACEBACK`` / ``exception_line`` / ``chain_marker``: how a Python traceback starts, ends
  and chains (used by every format: vLLM repeats its prefix on each of these lines).
"""

from __future__ import annotations

import json
import re

from llmtop.parse.logs import stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["LEVELS", "TRACEBACK", "chain_marker", "exception_line", "level", "parse"]

LEVELS = {
    "TRACE": "debug", "DEBUG": "debug", "DBG": "debug", "D": "debug",
    "INFO": "info", "NOTICE": "info", "SUCCESS": "info", "INF": "info", "I": "info",
    "REQUEST": "info",
    "WARN": "warning", "WARNING": "warning", "WRN": "warning", "W": "warning",
    "ERROR": "error", "ERR": "error", "EXCEPTION": "error", "E": "error",
    "CRITICAL": "critical", "FATAL": "critical", "PANIC": "critical", "CRIT": "critical",
    "EMERG": "critical", "ALERT": "critical", "F": "critical",
}
"""Level words and letters of every format -> ``SEVERITIES``."""

TRACEBACK = "Traceback (most recent call last):"
_CHAIN = ("During handling of the above exception, another exception occurred:",
          "The above exception was the direct cause of the following exception:")

_LEADING_STAMP = re.compile(r"\[?(" + stamps.ISO.pattern + r")\]?\s*")
_LEVEL_WORD = re.compile(
    r"\[?(TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|CRITICAL|FATAL|PANIC|"
    r"trace|debug|info|notice|warn|warning|error|critical|fatal|panic)\]?(?::|\s|$)")
_TORCH = re.compile(r"\[([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)? [^\]]*\] ")
_PY_WARNING = re.compile(r"(?:\S+:\d+: )?[A-Za-z_][\w.]*Warning: ")
_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault|Failure)"
                        r"(?::\s|:$|$)")


def level(word: str) -> str | None:
    """The severity of a level word or letter (any case); None when it is none."""
    return LEVELS.get(word.upper())


def exception_line(text: str) -> bool:
    """True for a Python exception line (``pkg.SomeError: message``): a traceback's end."""
    if not text or text[0].isspace():
        return False
    return _EXCEPTION.match(text) is not None


def chain_marker(text: str) -> bool:
    """True for the line between two chained tracebacks."""
    return text in _CHAIN


def _json(text: str) -> Parsed | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    word = next((obj[k] for k in ("level", "levelname", "severity") if k in obj), None)
    message = next((obj[k] for k in ("message", "msg") if k in obj), None)
    if not isinstance(word, str) or message is None:
        return None
    stamp = next((obj[k] for k in ("time", "timestamp", "asctime", "ts") if k in obj), None)
    lines = str(message).rstrip("\n").split("\n")
    return Parsed(body=lines[0], severity=level(word),
                  t_wall=stamps.iso(stamp) if isinstance(stamp, str) else None,
                  extra=tuple(lines[1:]))


def parse(text: str, ref: float) -> Parsed:
    """A line with no known format: its leading stamp, level word and body."""
    if text.startswith("{"):
        parsed = _json(text)
        if parsed is not None:
            return parsed
    t_wall = None
    body = text
    m = _LEADING_STAMP.match(body)
    if m is not None:
        t_wall = stamps.iso(m.group(1))
        if t_wall is not None:
            body = body[m.end():]
    severity = None
    t = _TORCH.match(body)
    if t is not None:
        severity = LEVELS[t.group(1)]
        if t_wall is None:
            mo, d, h, mi, s = (int(g) for g in t.group(2, 3, 4, 5, 6))
            t_wall = stamps.no_year(mo, d, h, mi, s, float(t.group(7) or 0.0), ref)
        return Parsed(body=body[t.end():], severity=severity, t_wall=t_wall)
    w = _LEVEL_WORD.match(body)
    if w is not None:
        severity = LEVELS[w.group(1).upper()]
        rest = body[w.end():].lstrip()
        return Parsed(body=rest if rest else body, severity=severity, t_wall=t_wall)
    if _PY_WARNING.match(body):
        severity = "warning"
    elif exception_line(body):
        severity = "error"
    return Parsed(body=body, severity=severity, t_wall=t_wall)
