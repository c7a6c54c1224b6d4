"""Bounded sparkline rings and the deduplicated event log. No clock, no UI.

``SeriesBook`` keeps one ring per ``(key, field)``, all aligned to one ring of commit
times: a ring created late is padded with ``None`` and a key missing at a commit gets
``None`` (gaps, never zeros).
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import TypeVar

from llmtop.model import Event

__all__ = ["EventLog", "SeriesBook", "tail"]

T = TypeVar("T")


class SeriesBook:
    """Aligned bounded rings of floats (``None`` = gap)."""

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self.times: deque[float] = deque(maxlen=maxlen)
        self.commits = 0
        """Points committed so far: never shrinks as the rings drop old points, so it is the
        absolute position just after each ring's newest point."""
        self._rings: dict[tuple[str, str], deque[float | None]] = {}

    def commit(self, t_wall: float, values: dict[tuple[str, str], float | None]) -> None:
        """Append one point to every ring: ``values`` for the keys given, None elsewhere."""
        n_before = len(self.times)
        self.commits += 1
        self.times.append(t_wall)
        for k, v in values.items():
            ring = self._rings.get(k)
            if ring is None:
                ring = deque([None] * min(n_before, self.maxlen), maxlen=self.maxlen)
                self._rings[k] = ring
            ring.append(v)
        for k, ring in self._rings.items():
            if k not in values:
                ring.append(None)

    def forget(self, row_key_prefix: str) -> None:
        """Drop the rings of every key starting with ``row_key_prefix`` (a target gone)."""
        for k in [k for k in self._rings if k[0].startswith(row_key_prefix)]:
            del self._rings[k]

    def get(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        """A fresh list (Textual reactives compare by value) of the newest ``last`` points
        (all when None); [] when unknown."""
        ring = self._rings.get((key, field))
        return [] if ring is None else tail(ring, last)


def tail(ring: deque[T], last: int | None) -> list[T]:
    """The newest ``last`` items of ``ring`` as a list (all when None)."""
    n = len(ring)
    if last is None or last >= n:
        return list(ring)
    if last <= 0:
        return []
    out = list(islice(reversed(ring), last))  # from the newest end: O(last), not O(len)
    out.reverse()
    return out


class EventLog:
    """A bounded deque of ``Event``; a repeat of the last text for a target is dropped."""

    def __init__(self, maxlen: int) -> None:
        self.events: deque[Event] = deque(maxlen=maxlen)
        self._last: dict[str | None, str] = {}

    def add(self, t_wall: float, level: str, target: str | None, text: str) -> bool:
        """Append unless it repeats; True when appended."""
        if self._last.get(target) == text:
            return False
        self._last[target] = text
        self.events.append(Event(t_wall, level, target, text))
        return True
