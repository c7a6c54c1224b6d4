"""What an envelope and a format make of one log line, before lines become events.

- ``Piece``: one text line out of its envelope (Docker json-file, CRI, journal, plain), with
  the envelope's time, stream and severity where it has them.
- ``Parsed``: what a line format read from that text: severity, time, the text without the
  format's prefix, and how the line joins its neighbours into one event.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Parsed", "Piece"]


@dataclass(slots=True)
class Piece:
    """One text line out of its envelope (cleaned: no control characters, bounded)."""

    text: str
    t_wall: float | None = None
    """The envelope's time for the line (Docker, CRI, journal), else None."""
    stream: str | None = None
    severity: str | None = None
    """The envelope's severity (the journal's ``PRIORITY``), used when the text has none."""
    more: bool = False
    """The line ended in a carriage return: vLLM's multi-line record continues on the next."""


@dataclass(slots=True)
class Parsed:
    """One line as its format reads it."""

    body: str
    """The text without the format's prefix (level, stamp, file:line)."""
    severity: str | None = None
    """From the line itself, mapped to ``SEVERITIES``; None when the line has no level."""
    t_wall: float | None = None
    """From the line's own stamp; None when it has none."""
    key: tuple[object, ...] | None = None
    """The prefix that every line of one multi-line record repeats (vLLM): lines with the same
    key whose record continues are one event. None for a line with no format prefix."""
    join: bool = False
    """The format says this line continues the event before it (glog's unprefixed lines)."""
    request_id: str | None = None
    extra: tuple[str, ...] = ()
    """More lines of the same record (a JSON formatter's traceback field)."""
