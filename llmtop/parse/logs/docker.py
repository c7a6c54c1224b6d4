"""Docker's ``json-file`` envelope: one JSON object per line (Docker's "JSON File logging driver").

- ``{"log": "<text>\\n", "stream": "stdout"|"stderr", "time": "<RFC 3339, ns>"}``; a ``log``
  without its trailing newline is a part of a longer line (Docker splits at 16 KiB), joined
  with the next parts of the same stream.
- A line that is not such an object (a damaged file) is kept as plain text.
"""

from __future__ import annotations

import json

from llmtop.parse.logs import stamps
from llmtop.parse.logs.clean import LINE_MAX, clean
from llmtop.parse.logs.parsed import Piece
from llmtop.parse.logs.partial import Partials

__all__ = ["Docker"]


class Docker:
    """Unwraps json-file lines, joining a long line's parts."""

    def __init__(self, line_max: int = LINE_MAX) -> None:
        self._line_max = line_max
        self._partials = Partials(line_max)

    def unwrap(self, raw: str | bytes, read_time: float) -> list[Piece]:
        try:
            obj = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            obj = None
        log = obj.get("log") if isinstance(obj, dict) else None
        if not isinstance(log, str):
            text, more = clean(raw, self._line_max)
            return [Piece(text=text, more=more)]
        stream = obj.get("stream")
        stream = stream if isinstance(stream, str) else None
        stamp = obj.get("time")
        t_wall = stamps.iso(stamp) if isinstance(stamp, str) else None
        if not log.endswith("\n"):
            self._partials.add(stream, log, t_wall)
            return []
        return [self._partials.take(stream, log, t_wall)]

    def drain(self) -> list[Piece]:
        return self._partials.drain()
