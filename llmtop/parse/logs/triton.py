"""Triton Inference Server's log lines (glog style, as the real 2.51 server writes them).

- ``I1207 04:47:19.123456 1234 server.cc:123] "message"``: severity letter (I, W, E, F),
  ``MMDD`` with no year, local time with microseconds, thread id, file:line; 2.51 quotes the
  message and escapes its newlines (``\\n``): unquoted here, one line per newline.
- A line with an empty message is followed by a table (``+----+``, ``| Model | ...``): the
  unprefixed lines after it join that event. Other unprefixed lines (``Signal (15)
  received.``, the Python backend's own output): the generic parser.
"""

from __future__ import annotations

import re

from llmtop.parse.logs import generic, stamps
from llmtop.parse.logs.parsed import Parsed

__all__ = ["glog", "parse"]

_GLOG = re.compile(r"([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{1,9})\s+(\d+) ([^\]\s]+)\] ?")
_ESC = re.compile(r'\\(["\\nt])')
_UNESCAPE = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}


def _unquote(body: str) -> list[str]:
    if len(body) >= 2 and body[0] == '"' and body[-1] == '"':
        return _ESC.sub(lambda m: _UNESCAPE[m.group(1)], body[1:-1]).split("\n")
    return [body]


def glog(text: str, ref: float) -> Parsed | None:
    """A glog-prefixed line, or None."""
    m = _GLOG.match(text)
    if m is None:
        return None
    mo, d, h, mi, s = (int(g) for g in m.group(2, 3, 4, 5, 6))
    frac = int(m.group(7)) / 10 ** len(m.group(7))
    lines = _unquote(text[m.end():])
    return Parsed(body=lines[0], severity=generic.LEVELS[m.group(1)],
                  t_wall=stamps.no_year(mo, d, h, mi, s, frac, ref), extra=tuple(lines[1:]))


def parse(text: str, ref: float) -> Parsed:
    """One line of a Triton log."""
    parsed = glog(text, ref)
    if parsed is not None:
        return parsed
    parsed = generic.parse(text, ref)
    parsed.join = True
    return parsed
