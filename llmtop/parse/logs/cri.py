"""The CRI envelope (containerd, CRI-O, Podman's ``k8s-file``; the kubelet's CRI logging format).

- ``<RFC 3339 nano time> <stdout|stderr> <tags> <text>``; the tags are ``:``-separated, the
  first ``P`` (a partial line, continued by the next line of the same stream) or ``F``.
- A line that does not have that shape is kept as plain text.
"""

from __future__ import annotations

from llmtop.parse.logs import stamps
from llmtop.parse.logs.clean import LINE_MAX, clean, decode
from llmtop.parse.logs.parsed import Piece
from llmtop.parse.logs.partial import Partials

__all__ = ["Cri"]


class Cri:
    """Unwraps CRI lines, joining partial ones."""

    def __init__(self, line_max: int = LINE_MAX) -> None:
        self._line_max = line_max
        self._partials = Partials(line_max)

    def unwrap(self, raw: str | bytes, read_time: float) -> list[Piece]:
        line = decode(raw).rstrip("\n")
        fields = line.split(" ", 3)
        t_wall = stamps.iso(fields[0]) if len(fields) >= 3 else None
        if t_wall is None or fields[1] not in ("stdout", "stderr"):
            text, more = clean(line, self._line_max)
            return [Piece(text=text, more=more)]
        stream = fields[1]
        text = fields[3] if len(fields) > 3 else ""
        if fields[2].split(":", 1)[0] == "P":
            self._partials.add(stream, text, t_wall)
            return []
        return [self._partials.take(stream, text, t_wall)]

    def drain(self) -> list[Piece]:
        return self._partials.drain()
