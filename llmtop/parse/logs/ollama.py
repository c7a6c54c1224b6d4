"""Ollama's log lines (``logutil/logutil.go``: Go's ``log/slog`` text handler; gin's access log).

- ``time=2026-12-07T09:30:00.123Z level=INFO source=routes.go:2008 msg="Listening on ..."
  key=value ...``: RFC 3339 time, level (DEBUG, INFO, WARN, ERROR, and Ollama's TRACE), the
  message quoted when it has spaces; the other attributes stay after the message.
- gin's access lines (``gin.Default()`` in ``server/routes.go``): ``[GIN] 2026/12/07 -
  09:30:00 | 200 | 1.2ms | 127.0.0.1 | POST "/api/generate"``: info, local time.
- Anything else (the llama.cpp runner's own output): the generic parser.
"""

from __future__ import annotations

import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["parse"]

_SLOG = re.compile(r'time=(\S+) level=([A-Z]+)(?:[+-]\d+)? (?:source=\S+ )?'
                   r'msg=("(?:[^"\\]|\\.)*"|\S*)')
_GIN = re.compile(r"\[GIN\] (\d{4})/(\d\d)/(\d\d) - (\d\d):(\d\d):(\d\d) \| ")
_ESC = re.compile(r'\\(["\\nt])')
_UNESCAPE = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def parse(text: str, ref: float) -> Parsed:
    """One line of an Ollama log."""
    m = _SLOG.match(text)
    if m is not None:
        msg = m.group(3)
        if msg.startswith('"'):
            msg = _ESC.sub(lambda e: _UNESCAPE[e.group(1)], msg[1:-1])
        rest = text[m.end():].strip()
        lines = (msg + (" " + rest if rest else "")).split("\n")
        return Parsed(body=lines[0], severity=generic.level(m.group(2)),
                      t_wall=stamps.iso(m.group(1)), extra=tuple(lines[1:]))
    g = _GIN.match(text)
    if g is not None:
        y, mo, d, h, mi, s = (int(x) for x in g.groups())
        return Parsed(body=text[g.end():], severity="info", t_wall=stamps.local(y, mo, d, h, mi, s))
    return generic.parse(text, ref)
