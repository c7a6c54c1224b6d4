"""The plain envelope: a line as the engine wrote it (a file, ``/proc/<pid>/fd/1``, a command).

- ``Plain().unwrap(raw, read_time)``: one ``Piece`` per line (a caller's chunk with newlines
  is split), cleaned and bounded; no time, no stream.
"""

from __future__ import annotations

from llmtop.parse.logs.clean import LINE_MAX, clean
from llmtop.parse.logs.parsed import Piece

__all__ = ["Plain"]


class Plain:
    """Lines as written: nothing to unwrap."""

    def __init__(self, line_max: int = LINE_MAX) -> None:
        self._line_max = line_max

    def unwrap(self, raw: str | bytes, read_time: float) -> list[Piece]:
        nl = b"\n" if isinstance(raw, bytes) else "\n"
        parts = raw.rstrip(nl).split(nl) if nl in raw else [raw]  # type: ignore[arg-type]
        pieces = []
        for part in parts:
            text, more = clean(part, self._line_max)
            pieces.append(Piece(text=text, more=more))
        return pieces

    def drain(self) -> list[Piece]:
        return []
