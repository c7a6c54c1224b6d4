"""Lines -> events: multi-line events joined, bounded, redacted, given a time and a severity.

- One ``Assembler`` per followed log: an envelope (``plain``, ``docker``, ``cri``,
  ``journal``) unwraps each raw line, a format's ``parse`` reads it, and the assembler decides
  whether it continues the open event:
  - a line with the open event's prefix while that record goes on (vLLM: the prefix repeats
    on every line; every line but the last ends in a carriage return), or while its traceback
    has not reached its exception line;
  - a bare Python traceback, from ``Traceback (most recent call last):`` to its exception
    line, chained tracebacks included;
  - an indented line after an unprefixed line (a warning's source line, a list);
  - a line the format joins (glog's table after an empty message).
- The open event is closed by the next line that does not continue it, by a gap of
  ``quiet_s`` of read time, or by ``flush(now)`` once the log was quiet that long.
- Bounded: ``max_lines`` per event (the first and the last half kept, the middle cut with a
  marker; the exception line is kept as the headline whatever is cut), each line bounded by
  ``clean``; every line redacted before it is kept.
- The headline is the last exception line of a traceback, else the first non-blank line.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from llmtop.model import LogEvent
from llmtop.model.logs import SEVERITIES
from llmtop.parse.logs import generic
from llmtop.parse.logs.parsed import Parsed, Piece
from llmtop.parse.logs.redact import redact

__all__ = ["MAX_LINES", "QUIET_S", "Assembler", "Envelope"]

MAX_LINES = 200
"""Lines kept of one event."""
QUIET_S = 0.5
"""Read-time quiet after which an open event is closed."""
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
_HARD_MAX = 50
"""An event still growing after ``_HARD_MAX * max_lines`` lines is closed all the same."""


class Envelope(Protocol):
    """How one log's runtime stored its lines."""

    def unwrap(self, raw: str | bytes, read_time: float) -> list[Piece]: ...

    def drain(self) -> list[Piece]: ...


class _Open:
    """The event being assembled."""

    __slots__ = ("count", "head", "headline", "key", "last", "last_read", "more", "open_ended",
                 "request_id", "severity", "stamped", "stream", "t_wall", "tail", "tb")

    def __init__(self, parsed: Parsed, piece: Piece, read_time: float, tail: int) -> None:
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=tail)
        self.count = 0
        self.last = ""
        self.headline: str | None = None
        self.key = parsed.key
        self.more = False
        self.open_ended = not parsed.body.strip()
        self.request_id = parsed.request_id
        self.stream = piece.stream
        self.tb = ""  # "" | "open" (frames) | "done" (exception line seen) | "chain"
        # the runtime's own stamp (Docker, CRI, the journal) is zoned and exact; the engine's
        # (vLLM's ``MM-DD HH:MM:SS``) has no zone and is read in llmtop's: the envelope's wins
        t_wall = piece.t_wall if piece.t_wall is not None else parsed.t_wall
        self.stamped = t_wall is not None
        self.t_wall = t_wall if t_wall is not None else read_time
        self.last_read = read_time
        severity = parsed.severity or piece.severity
        if severity is None and parsed.body.startswith(generic.TRACEBACK):
            severity = "error"
        self.severity = severity or "info"


class Assembler:
    """Turns one log's raw lines into events (see the module docstring)."""

    def __init__(self, parse: Callable[[str, float], Parsed], envelope: Envelope, *,
                 keep_prompts: bool = False, max_lines: int = MAX_LINES,
                 quiet_s: float = QUIET_S) -> None:
        self._parse = parse
        self._envelope = envelope
        self._keep_prompts = keep_prompts
        self._head = max(1, max_lines // 2)
        self._tail = max(1, max_lines - self._head - 1)
        self._hard = _HARD_MAX * max_lines
        self._quiet = quiet_s
        self._open: _Open | None = None
        self._last_read = float("-inf")

    def feed(self, raw: str | bytes, read_time: float) -> list[LogEvent]:
        """The events ``raw`` (one line as read, without its newline) completed."""
        out: list[LogEvent] = []
        self._last_read = read_time
        for piece in self._envelope.unwrap(raw, read_time):
            self._line(piece, read_time, out)
        return out

    def flush(self, now: float) -> list[LogEvent]:
        """The open event (and any unfinished partial line) once the log was quiet."""
        out: list[LogEvent] = []
        if now - self._last_read < self._quiet:
            return out
        for piece in self._envelope.drain():
            self._line(piece, now, out)
        self._close(out)
        return out

    # -- one line

    def _line(self, piece: Piece, read_time: float, out: list[LogEvent]) -> None:
        ev = self._open
        if ev is not None and read_time - ev.last_read > self._quiet:
            self._close(out)
            ev = None
        ref = piece.t_wall if piece.t_wall is not None else read_time
        try:
            parsed = self._parse(piece.text, ref)
        except (ValueError, TypeError, OverflowError, RecursionError):
            parsed = Parsed(body=piece.text)
        body = redact(parsed.body, self._keep_prompts)
        extra = [redact(x, self._keep_prompts) for x in parsed.extra]
        if ev is not None and self._continues(ev, parsed, body, piece):
            ev.last_read = read_time
            ev.more = piece.more
            if ev.request_id is None:
                ev.request_id = parsed.request_id
            self._add(ev, body)
            for x in extra:
                self._add(ev, x)
            if ev.count >= self._hard:
                self._close(out)
            return
        self._close(out)
        if not piece.text.strip():
            return  # a blank line between events
        ev = _Open(parsed, piece, read_time, self._tail)
        ev.more = piece.more
        self._open = ev
        self._add(ev, body)
        for x in extra:
            self._add(ev, x)

    def _continues(self, ev: _Open, parsed: Parsed, body: str, piece: Piece) -> bool:
        if parsed.key is not None:
            # the record goes on (its line ended in \r), or, where the \r was lost (the
            # journal drops it), its traceback does
            return parsed.key == ev.key and (
                ev.more or ev.tb == "open" or body.startswith(generic.TRACEBACK)
                or (ev.tb in ("done", "chain") and (not body.strip()
                                                    or generic.chain_marker(body))))
        if ev.key is not None:
            return False  # an unprefixed line never joins a prefixed record
        if parsed.join and ev.open_ended:
            return True
        if ev.tb == "open":
            return True
        if body.startswith(generic.TRACEBACK) and ev.tb == "" and (
                _RANK.get(ev.severity, 1) >= 2 or ev.last.rstrip().endswith(":")):
            return True  # the traceback a record logged with its exception
        if ev.tb in ("done", "chain"):
            return not body.strip() or generic.chain_marker(body) or (
                ev.tb == "chain" and body.startswith(generic.TRACEBACK))
        return (parsed.severity is None and body[:1] in (" ", "\t") and body.strip() != ""
                and not parsed.extra)

    def _add(self, ev: _Open, line: str) -> None:
        ev.count += 1
        ev.last = line
        if len(ev.head) < self._head:
            ev.head.append(line)
        else:
            ev.tail.append(line)
        if line.endswith(generic.TRACEBACK):
            ev.tb = "open"
        elif ev.tb == "open" and line.strip() and not line[0].isspace() \
                and not generic.chain_marker(line):
            ev.headline = line
            ev.tb = "done"
        elif ev.tb == "done" and generic.chain_marker(line):
            ev.tb = "chain"

    def _close(self, out: list[LogEvent]) -> None:
        ev = self._open
        if ev is None:
            return
        self._open = None
        lines = ev.head + list(ev.tail)
        cut = ev.count - len(lines)
        if cut > 0:
            lines.insert(len(ev.head), f"[… {cut} lines cut]")
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        while len(lines) > 1 and not lines[0].strip():
            lines.pop(0)
        headline = ev.headline
        if headline is None:
            headline = next((x for x in lines if x.strip()), "")
        out.append(LogEvent(t_wall=ev.t_wall, severity=ev.severity, lines=tuple(lines),
                            headline=headline, stream=ev.stream, request_id=ev.request_id,
                            stamped=ev.stamped))
