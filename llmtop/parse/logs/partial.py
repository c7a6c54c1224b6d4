"""Partial lines joined, for the envelopes that split a long line (Docker at 16 KiB, CRI's P).

- ``Partials.add(stream, text, t_wall)``: keeps a piece of a line, bounded (what passes the
  bound is counted, not kept).
- ``Partials.take(stream, text)``: the whole line (pieces kept + ``text``) and the time of its
  first piece; ``drain()`` hands back every unfinished line (its log went quiet).
"""

from __future__ import annotations

from llmtop.parse.logs.clean import LINE_MAX, clean
from llmtop.parse.logs.parsed import Piece

__all__ = ["Partials"]


class Partials:
    """Unfinished lines by stream."""

    def __init__(self, line_max: int = LINE_MAX) -> None:
        self._line_max = line_max
        self._open: dict[str | None, tuple[list[str], float | None, int]] = {}

    def add(self, stream: str | None, text: str, t_wall: float | None) -> None:
        parts, first, size = self._open.get(stream, ([], t_wall, 0))
        if size < 4 * self._line_max:
            parts.append(text[: 4 * self._line_max - size])
        self._open[stream] = (parts, first, size + len(text))

    def take(self, stream: str | None, text: str, t_wall: float | None) -> Piece:
        parts, first, size = self._open.pop(stream, ([], t_wall, 0))
        if parts:
            parts.append(text[: max(0, 4 * self._line_max - size)])
            whole = "".join(parts)
        else:
            whole = text
        cleaned, more = clean(whole, self._line_max, size + len(text))
        return Piece(text=cleaned, t_wall=first if first is not None else t_wall,
                     stream=stream, more=more)

    def drain(self) -> list[Piece]:
        streams = list(self._open)
        return [self.take(s, "", None) for s in streams]
