"""The journal envelope: ``journalctl -o json``, one JSON object per entry.

- Fields as systemd.journal-fields(7) and journalctl(1) describe them.

- ``MESSAGE``: a string, or an array of bytes when it is not valid UTF-8 (decoded with
  replacement), or null when journalctl left out a field over 4096 bytes (without ``--all``).
- ``PRIORITY`` ``"0"``..``"7"`` (syslog levels) is the severity when the text has none;
  ``__REALTIME_TIMESTAMP`` (µs since the epoch) the time; a message with newlines is one line
  per newline.
- A line that is not such an object is kept as plain text.
"""

from __future__ import annotations

import json

from llmtop.parse.logs import stamps
from llmtop.parse.logs.clean import LINE_MAX, clean
from llmtop.parse.logs.parsed import Piece

__all__ = ["PRIORITIES", "Journal"]

PRIORITIES = ("critical", "critical", "critical", "error", "warning", "info", "info", "debug")
"""syslog priority 0 (emerg) .. 7 (debug) -> ``SEVERITIES``."""

_TOO_BIG = "[message over 4096 bytes: journalctl -o json --all shows it]"


def _message(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    if value is None:
        return _TOO_BIG
    return None


class Journal:
    """Unwraps ``journalctl -o json`` entries."""

    def __init__(self, line_max: int = LINE_MAX) -> None:
        self._line_max = line_max

    def unwrap(self, raw: str | bytes, read_time: float) -> list[Piece]:
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            obj = None
        if not isinstance(obj, dict) or "MESSAGE" not in obj:
            text, more = clean(raw, self._line_max)
            return [Piece(text=text, more=more)]
        message = _message(obj["MESSAGE"])
        if message is None:  # not a message journalctl writes: shown as the line it is
            text, more = clean(raw, self._line_max)
            return [Piece(text=text, more=more)]
        t_wall = None
        try:
            t_wall = int(obj.get("__REALTIME_TIMESTAMP")) / 1e6
        except (TypeError, ValueError, OverflowError):
            pass
        if t_wall is not None and not stamps.plausible(t_wall):
            t_wall = None
        severity = None
        try:
            priority = int(obj.get("PRIORITY"))
        except (TypeError, ValueError):
            priority = -1
        if 0 <= priority < len(PRIORITIES):
            severity = PRIORITIES[priority]
        pieces = []
        for line in message.rstrip("\n").split("\n")[: 4 * self._line_max]:
            text, more = clean(line, self._line_max)
            pieces.append(Piece(text=text, t_wall=t_wall, severity=severity, more=more))
        return pieces

    def drain(self) -> list[Piece]:
        return []
