"""Engine log events kept per target: bounded, counted, summarised for the rows, cited.

- ``LogBook``: per target the newest ``max_events`` events (a bounded deque), the counts by
  severity since llmtop started following (the exporter's counter), the follower's drops,
  the newest error event (kept past the window and past a restart), the location and why it
  cannot be read, and when the operator last opened the log (``seen``).
- ``LogBook.summary``: one target's ``LogSummary`` over a window (the row's ``log``).
- ``LogBook.cause``: the error event that explains a bad state (``DOWN``, ``RESTARTED``...):
  the newest error event from ``LOG_CAUSE_S`` before the engine was last seen good (or, for
  ``RESTARTED``, up to the new process's first answer); never an info line written after
  it (``INFO: Shutting down``, ``nanobind: leaked``), and nothing when the log has no error.
- ``state_text``: the row's reason with that event's headline (``log: EngineDeadError: ...``).

Pure: no clock, no I/O; every time is passed in (wall-clock seconds, as the events carry).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from llmtop.model import EngineRow
from llmtop.model.logs import (
    SEVERITIES,
    LogEvent,
    LogLocation,
    LogSummary,
    RawLog,
    severity_at_least,
)

__all__ = ["CITE_STATES", "HEADLINE_MAX", "LOG_CAUSE_S", "LOG_LINES_DEFAULT", "READ_SLACK_S",
           "LogBook", "TargetLog", "clock_text", "events_between", "headline_text",
           "is_error", "state_text"]

LOG_LINES_DEFAULT = 2000
"""Events kept per target when the config does not say (``log_lines``)."""

LOG_CAUSE_S = 60.0
"""How long before the engine was last seen good an error may have been logged and still
explain the state: the real vLLM writes its EngineDeadError burst and exits within a second,
and the next scrape fails; a minute covers a slow scrape interval and a log stamped in whole
seconds. An older error says nothing of this state (no false claim)."""

ORDER_SLACK_S = 10.0
"""Events arrive nearly in time order (stamps in whole seconds, several processes writing):
a walk back through the kept events stops this far before the window's start."""

READ_SLACK_S = 1.0
"""An event without a stamp of its own carries its read time, up to a follower's poll after
it was written: it counts as logged before the new process answered within this."""

HEADLINE_MAX = 200
"""Characters of a headline put into a row's reason (the full text stays on the event)."""

CITE_STATES = ("down", "http_error", "stale", "restarted")
"""States a log line can explain: the engine stopped answering, answers errors, or came back
as a new process. ``unauthorized`` and ``bad_payload`` are about the scrape, not the engine."""


_ERRORS = frozenset(s for s in SEVERITIES if severity_at_least(s, "error"))


def is_error(e: LogEvent) -> bool:
    """An error or critical event."""
    return e.severity in _ERRORS


def headline_text(e: LogEvent) -> str:
    """The event's headline, at most ``HEADLINE_MAX`` characters (``…`` when cut)."""
    text = " ".join(e.headline.split()) or (e.lines[0] if e.lines else "")
    return text if len(text) <= HEADLINE_MAX else text[: HEADLINE_MAX - 1] + "\u2026"


def clock_text(t_wall: float) -> str:
    """``04:47:19``: an event's time of day (local), as the engines' own lines write it;
    ``--:--:--`` for a time that is not one (NaN, out of range: a damaged recording)."""
    try:
        return time.strftime("%H:%M:%S", time.localtime(t_wall))
    except (ValueError, OverflowError, OSError, TypeError):
        return "--:--:--"


def events_between(events: Sequence[LogEvent], start: float, end: float | None = None
                   ) -> list[LogEvent]:
    """The events with ``start < t_wall`` (and ``t_wall <= end`` when given), oldest first."""
    return [e for e in events if e.t_wall > start and (end is None or e.t_wall <= end)]


@dataclass(slots=True)
class TargetLog:
    """Everything kept of one target's log."""

    events: deque[LogEvent]
    location: LogLocation | None = None
    error: str | None = None
    """Why the latest read failed (the follower keeps trying); None when it read."""
    totals: dict[str, int] = field(default_factory=dict)
    """Events by severity since llmtop started following (kept or since evicted)."""
    dropped: int = 0
    """Events the follower read but could not keep, since start."""
    last_error: LogEvent | None = None
    """The newest error or critical event (by arrival), kept past the window."""
    seen_t: float | None = None
    """When the operator last opened this log (``LogBook.seen``); None: never."""
    restart: tuple[float, float] | None = None
    """(the old process's last good answer, the new process's first), wall times."""
    said: LogEvent | None = None
    """The cause the event log already named for the current bad episode."""
    view: tuple[LogEvent, ...] | None = None
    """``events`` as a tuple, built once per change (``Snapshot.log_events``)."""
    version: int = 0
    """Bumped by every read with events (what the cached counts below depend on)."""
    new_cache: tuple[int, float | None, int] | None = None
    """(version, seen_t, new errors): counted once per change, not per snapshot."""


class LogBook:
    """Every target's kept log (see the module doc)."""

    def __init__(self, max_events: int = LOG_LINES_DEFAULT) -> None:
        self.max_events = max(1, int(max_events))
        self._logs: dict[str, TargetLog] = {}

    def __contains__(self, target: str) -> bool:
        return target in self._logs

    def get(self, target: str) -> TargetLog | None:
        return self._logs.get(target)

    def _log(self, target: str) -> TargetLog:
        tl = self._logs.get(target)
        if tl is None:
            tl = self._logs[target] = TargetLog(deque(maxlen=self.max_events))
        return tl

    def add(self, raw: RawLog) -> None:
        """Keep one follower read: its events, drops, location and read error."""
        tl = self._log(raw.target)
        tl.location = raw.location
        tl.error = raw.error
        tl.dropped += max(0, int(raw.dropped or 0))
        if raw.events:
            tl.view = None
            tl.version += 1
        for e in raw.events:
            tl.events.append(e)
            sev = e.severity if e.severity in SEVERITIES else "info"
            tl.totals[sev] = tl.totals.get(sev, 0) + 1
            if is_error(e):
                tl.last_error = e

    def forget(self, target: str) -> None:
        self._logs.pop(target, None)

    def seen(self, target: str, t_wall: float) -> None:
        """The operator opened ``target``'s log at ``t_wall``: its errors up to then are no
        longer new."""
        tl = self._logs.get(target)
        if tl is not None and (tl.seen_t is None or t_wall > tl.seen_t):
            tl.seen_t = t_wall

    def restarted(self, target: str, old_last_wall: float, new_first_wall: float) -> None:
        """The store saw ``target`` restart: the old process last answered at
        ``old_last_wall``, the new one first at ``new_first_wall``."""
        self._log(target).restart = (old_last_wall, new_first_wall)

    def events(self) -> dict[str, tuple[LogEvent, ...]]:
        """Every target's kept events, oldest first (read-only tuples, rebuilt only after
        new events came in)."""
        out: dict[str, tuple[LogEvent, ...]] = {}
        for name, tl in self._logs.items():
            if tl.view is None:
                tl.view = tuple(tl.events)
            out[name] = tl.view
        return out

    def window(self, target: str, window_s: float, t_wall: float) -> list[LogEvent]:
        """``target``'s events in the window ending at ``t_wall``, oldest first."""
        tl = self._logs.get(target)
        if tl is None:
            return []
        start = t_wall - window_s
        out: list[LogEvent] = []
        for e in reversed(tl.events):
            if e.t_wall < start - ORDER_SLACK_S:
                break
            if e.t_wall > start:
                out.append(e)
        out.reverse()
        return out

    def windows(self, window_s: float, t_wall: float) -> dict[str, list[LogEvent]]:
        """``window`` of every target that has events in it."""
        out = {}
        for name in self._logs:
            got = self.window(name, window_s, t_wall)
            if got:
                out[name] = got
        return out

    def summary(self, target: str, window_s: float, t_wall: float) -> LogSummary | None:
        """``target``'s log over the window ending at ``t_wall``; None when no log of it was
        ever followed."""
        tl = self._logs.get(target)
        if tl is None:
            return None
        loc = tl.location
        if tl.error and loc is not None and loc.error is None:
            loc = replace(loc, error=tl.error)
        counts = dict.fromkeys(SEVERITIES, 0)
        start = t_wall - window_s
        stop = start - ORDER_SLACK_S
        for e in reversed(tl.events):  # as ``window``, counted without a list
            t = e.t_wall
            if t < stop:
                break
            if t > start:
                sev = e.severity
                counts[sev if sev in counts else "info"] += 1
        seen = tl.seen_t
        got = tl.new_cache
        if got is not None and got[0] == tl.version and got[1] == seen:
            new = got[2]
        else:
            new = sum(1 for e in tl.events if e.severity in _ERRORS
                      and (seen is None or e.t_wall > seen))
            tl.new_cache = (tl.version, seen, new)
        return LogSummary(location=loc, counts=counts, last_error=tl.last_error,
                          new_errors=new, dropped=tl.dropped, lines_total=dict(tl.totals))

    def cause(self, target: str, state: str, last_good_wall: float | None) -> LogEvent | None:
        """The error event that explains ``state`` (see the module doc); None when the log
        says nothing of it. ``last_good_wall``: when the engine last answered well (None:
        never, as far as the store knows: any kept error may explain it)."""
        tl = self._logs.get(target)
        if tl is None or state not in CITE_STATES:
            return None
        if state == "restarted":
            if tl.restart is None:
                return None
            old_last, new_first = tl.restart
            lo, hi = old_last - LOG_CAUSE_S, new_first + READ_SLACK_S
        else:
            lo = last_good_wall - LOG_CAUSE_S if last_good_wall is not None else None
            hi = None

        def fits(e: LogEvent) -> bool:
            return (is_error(e) and (lo is None or e.t_wall >= lo)
                    and (hi is None or e.t_wall <= hi))

        for e in reversed(tl.events):
            if fits(e):
                return e
            if lo is not None and e.t_wall < lo - ORDER_SLACK_S:
                break  # older still: none of them may explain it
        e = tl.last_error  # evicted from the kept events by later lines
        return e if e is not None and fits(e) else None

    def annotate(self, target: str, rows: Sequence[EngineRow], window_s: float,
                 t_wall: float, last_good_wall: float | None) -> None:
        """Put ``target``'s ``summary`` on its rows, and the explaining line (``cause``) in
        the reason of a row in a state it explains (``state_text``)."""
        if target not in self._logs:
            return
        summary = self.summary(target, window_s, t_wall)
        for r in rows:
            r.log = summary
            cause = self.cause(target, r.state, last_good_wall)
            if cause is not None:
                r.log = replace(summary, cause=cause)
                r.error = state_text(r.error, cause)

    def to_say(self, target: str, state: str, last_good_wall: float | None
               ) -> LogEvent | None:
        """The explaining line the event log should name now: the ``cause`` of ``state``
        once per episode (None when already said, or none); ``ok`` ends the episode."""
        tl = self._logs.get(target)
        if tl is None:
            return None
        if state == "ok":
            tl.said = None
            return None
        cause = self.cause(target, state, last_good_wall)
        if cause is None or cause is tl.said:
            return None
        tl.said = cause
        return cause

    def counts(self) -> Mapping[str, Mapping[str, int]]:
        """Events by severity since start, per target (the exporter's counter)."""
        return {name: dict(tl.totals) for name, tl in self._logs.items()}


def state_text(reason: str | None, cause: LogEvent) -> str:
    """The row's reason carrying its log line: ``log: <headline> (connection refused)``."""
    text = f"log: {headline_text(cause)}"
    return f"{text} ({reason})" if reason else text
