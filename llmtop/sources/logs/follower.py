"""The log follower: every engine's log read off the loop, events queued until the tick drains.

- ``Follower(assemble, lines)`` implements ``monitor.ports.LogFollower``: ``follow`` /
  ``forget`` / ``drain`` / ``close``. One reader thread for every log (started with the first
  ``follow``), polling every ``POLL_S``; files through ``tail.FileTail``, the journal and
  commands through ``child.ChildTail`` (a child process each, ended on ``forget`` and
  ``close``).
- Raw lines become events through ``assemble(fmt, envelope)`` (``llmtop.parse.logs.
  assembler``, passed in by the monitor: sources sit below parsing), one assembler per log.
- Bounded: at most ``lines`` events per target between drains (errors kept apart, in a
  tenth of them, so a flood of info lines does not push out the line that explains it); the
  rest are counted in ``RawLog.dropped``. At most ``PARSE_RATE`` lines a second per log are
  made into events; past it only the lines with a mark of trouble are (``tail.SERIOUS``),
  the rest counted in ``dropped`` unread: a flood costs a scan of its bytes, not a parse of
  every line. A log that outran the reader says how much it skipped in an event of its own.
- Errors (unreadable, vanished, a child that ended) reach the next drain as
  ``RawLog.error``, once per change; the reader keeps trying with back-off.
- ``poll()`` is one round of the reader (tests call it with ``thread=False``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from llmtop import clock
from llmtop.model import LogEvent, LogLocation, RawLog
from llmtop.model.logs import severity_at_least
from llmtop.sources.logs.child import ChildTail, journal_argv
from llmtop.sources.logs.tail import FileTail, TailRead, newest_cri

__all__ = ["ENVELOPE_OF", "JOURNAL_LINES", "POLL_S", "Follower", "make_reader"]

POLL_S = 0.25
"""How often the reader thread looks at every log."""
PARSE_RATE = 500.0
"""Lines a second per log made into events before only the lines with a mark of trouble are
(a burst of a second's worth passes whole): an engine's own log writes far fewer; a flood
of 10,000 lines a second would otherwise cost a parse of each."""
JOURNAL_LINES = 50
"""Journal entries read when following a unit starts (then only new ones)."""
ENVELOPE_OF = {"file": "plain", "command": "plain", "docker": "docker", "cri": "cri",
               "journal": "journal"}
"""The envelope (``parse.logs``) each kind of log wraps its lines in."""


class _Reader(Protocol):
    def read(self, limit: int | None = None) -> TailRead: ...

    def close(self) -> None: ...


def make_reader(where: LogLocation, *, journalctl: str = "journalctl") -> _Reader | None:
    """The reader of a location (None: nothing to read, its ``error`` says why)."""
    if where.error is not None or where.kind is None:
        return None
    if where.kind == "journal":
        return ChildTail(journal_argv(where.unit, where.pid, JOURNAL_LINES,
                                      journalctl=journalctl), f"journalctl ({where.label})",
                         again=journal_argv(where.unit, where.pid, 0, journalctl=journalctl))
    if where.kind == "command":
        import shlex

        return ChildTail(shlex.split(where.path or ""), where.label)
    if where.path is None:
        return None
    resolve = None
    if where.kind == "cri" and os.path.basename(where.path)[:-4].isdigit():
        folder = os.path.dirname(where.path)
        resolve = lambda: newest_cri(folder)  # noqa: E731 - a pod container's restart
    return FileTail(where.path, resolve=resolve)


@dataclass(slots=True)
class _Watch:
    """One followed log and what was read from it since the last drain."""

    location: LogLocation
    reader: _Reader | None
    assembler: Any
    cap: int
    plain: deque[tuple[int, LogEvent]] = field(init=False)
    serious: deque[tuple[int, LogEvent]] = field(init=False)
    dropped: int = 0
    rotated: bool = False
    error: str | None = None
    said: str | None = None
    """The error the last drain reported."""
    fresh: bool = True
    """Not drained yet (an unreadable location answers once)."""
    tokens: float = -1.0
    """Lines it may still parse now (refilled at ``rate`` a second; -1: not started)."""
    filled_at: float = 0.0

    def __post_init__(self) -> None:
        keep = max(1, self.cap // 10) if self.cap >= 10 else 0
        self.serious = deque(maxlen=keep or None)
        self.plain = deque(maxlen=max(1, self.cap - keep))

    def add(self, seq: int, ev: LogEvent) -> None:
        q = self.serious if (self.serious.maxlen and severity_at_least(ev.severity, "error")
                             ) else self.plain
        if q.maxlen is not None and len(q) >= q.maxlen:
            self.dropped += 1
        q.append((seq, ev))

    def take(self) -> list[LogEvent]:
        both = sorted(itertools.chain(self.plain, self.serious), key=lambda p: p[0])
        self.plain.clear()
        self.serious.clear()
        return [ev for _, ev in both]

    def news(self) -> bool:
        return bool(self.plain or self.serious or self.dropped or self.rotated
                    or self.error != self.said or self.fresh)


class Follower:
    """Engine logs followed by one reader thread (see the module docstring)."""

    def __init__(self, assemble: Callable[[str | None, str], Any], *, lines: int = 2000,
                 thread: bool = True, poll_s: float = POLL_S, rate: float = PARSE_RATE,
                 reader: Callable[[LogLocation], _Reader | None] = make_reader) -> None:
        self._assemble = assemble
        self.lines = max(1, int(lines))
        self._thread_wanted = thread
        self.poll_s = poll_s
        self.rate = rate
        self._make_reader = reader
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}
        self._closing: list[_Reader] = []
        """Readers of forgotten logs, closed by the reader thread (a child is reaped there)."""
        self._seq = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.polls = 0

    # ------------------------------------------------------------------ the port
    def follow(self, target: str, where: LogLocation) -> None:
        """Follow ``where`` for ``target`` (again from its end when it moved; from where it
        was when only its line format is new)."""
        with self._lock:
            old = self._watches.get(target)
            if old is not None and old.location == where:
                return
            if (old is not None and old.reader is not None
                    and dataclasses.replace(old.location, fmt=where.fmt) == where):
                # only the line format is new (the engine became known): the same reader
                # goes on where it was, nothing is read twice
                old.assembler = self._assemble(where.fmt, ENVELOPE_OF.get(where.kind or "file",
                                                                          "plain"))
                old.location = where
                return
            if old is not None and old.reader is not None:
                self._closing.append(old.reader)
            try:
                reader = self._make_reader(where)
                envelope = ENVELOPE_OF.get(where.kind or "file", "plain")
                assembler = self._assemble(where.fmt, envelope) if reader else None
            except Exception as exc:  # a bad location is a state, never a crash
                reader, assembler = None, None
                where = LogLocation(None, where.label, error=f"{where.label}: {exc}")
            w = _Watch(where, reader, assembler, self.lines)
            w.error = where.error
            self._watches[target] = w
        if reader is not None:
            self._start_thread()

    def forget(self, target: str) -> None:
        """Stop following ``target``'s log (its child process ends on the reader thread)."""
        with self._lock:
            w = self._watches.pop(target, None)
            if w is not None and w.reader is not None:
                self._closing.append(w.reader)
        if w is not None and w.reader is not None and self._thread is None:
            self._close_forgotten()

    def drain(self) -> list[RawLog]:
        """One ``RawLog`` per target with news since the last call."""
        now_mono, now_wall = clock.monotonic(), clock.time()
        out = []
        with self._lock:
            for name, w in self._watches.items():
                if not w.news():
                    continue
                raw = RawLog(name, now_wall, now_mono, w.location, w.take(), w.dropped,
                             w.rotated, w.error)
                w.dropped, w.rotated, w.said, w.fresh = 0, False, w.error, False
                out.append(raw)
        return out

    def close(self) -> None:
        """Stop the reader thread; end every child process and let every file go."""
        self._stop.set()
        t = self._thread
        if t is not None:
            t.join(timeout=5.0)
        with self._lock:
            for w in self._watches.values():
                if w.reader is not None:
                    self._closing.append(w.reader)
            self._watches.clear()
        self._close_forgotten()

    # ------------------------------------------------------------------ the reader
    def following(self) -> dict[str, LogLocation]:
        """What is followed now, by target."""
        with self._lock:
            return {n: w.location for n, w in self._watches.items()}

    def _start_thread(self) -> None:
        if not self._thread_wanted or self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(target=self._run, name="llmtop-logs", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # pragma: no cover - one bad round must not end following
                pass
            self._stop.wait(self.poll_s)

    def poll(self) -> None:
        """One round: read every log, turn its lines into events, queue them."""
        self.polls += 1
        self._close_forgotten()
        with self._lock:
            watches = [(n, w) for n, w in self._watches.items() if w.reader is not None]
        for name, w in watches:
            assert w.reader is not None
            got = w.reader.read(self._allowance(w))
            w.tokens = max(0.0, w.tokens - len(got.lines))
            now = clock.time()
            events: list[LogEvent] = []
            for line in got.lines:
                events.extend(_safe(w.assembler.feed, line, now))
            if not got.lines:
                events.extend(_safe(w.assembler.flush, now))
            if got.skipped:
                text = (f"{got.skipped / 1e6:.1f} MB of this log skipped: it grew faster than "
                        "it could be read")
                events.append(LogEvent(now, "warning", (text,), text, stamped=False))
            with self._lock:
                if self._watches.get(name) is not w:
                    continue  # forgotten or replaced meanwhile
                for ev in events:
                    w.add(next(self._seq), ev)
                w.rotated = w.rotated or got.rotated
                w.error = got.error
                w.dropped += got.skimmed

    def _allowance(self, w: _Watch) -> int:
        """Lines ``w`` may make into events in this round (its token bucket); the first read
        (the log's last few KB) is not limited."""
        now = clock.monotonic()
        if w.tokens < 0:
            w.tokens, w.filled_at = self.rate, now
            return 1 << 30
        w.tokens = min(self.rate, w.tokens + (now - w.filled_at) * self.rate)
        w.filled_at = now
        return int(w.tokens)

    def _close_forgotten(self) -> None:
        with self._lock:
            closing, self._closing = self._closing, []
        for r in closing:
            try:
                r.close()
            except Exception:  # pragma: no cover - closing must go on to the next
                pass


def _safe(fn: Callable[..., list[LogEvent]], *args: Any) -> list[LogEvent]:
    """An assembler's answer; a line it cannot take becomes a plain event, never a crash."""
    try:
        return list(fn(*args))
    except Exception as exc:
        text = f"(a log line could not be read: {type(exc).__name__})"
        return [LogEvent(clock.time(), "warning", (text,), text, stamped=False)]
