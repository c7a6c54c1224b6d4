"""Autodiscovery that keeps looking: engines started after llmtop join the running monitor.

- When no target is given, ``Monitor`` searches this machine (``discovery.search``) before
  its first tick and again every ``REDISCOVER_S`` (10) seconds in the background (never
  delaying a tick). A newly found engine is added and named in the event log.
- A found engine that later stops answering is kept and shows as DOWN, as a named target
  would: it is not dropped.
- A router's backends join the same way (``discovery.routers.backend_targets``); which
  found targets are new or moved: ``discovery.changes``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from llmtop.config import Config, Target

__all__ = ["REDISCOVER_S", "Rediscovery"]

REDISCOVER_S = 10.0
"""Seconds between searches after the first (each costs a few ms: /proc and 9 ports)."""

Find = Callable[[Config], Awaitable[list[Target]]]


class Rediscovery:
    """Searches for engines: once at start (awaited), then every ``every_s`` in a task."""

    def __init__(self, config: Config, *, every_s: float = REDISCOVER_S,
                 find: Find | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.every_s = every_s
        self._find = find or self._discover_noting
        self._clock = clock
        self._task: asyncio.Task[list[Target]] | None = None
        self._last: float | None = None
        """When the last search finished (None: none has)."""
        self.notes: list[str] = []
        """What the latest search could not read (``discovery.notes``), newest search's."""
        self.searches = 0
        """Searches that finished with an answer: a change means the latest ``first``/``poll``
        answer is the whole of what this machine runs now (an engine not in it is gone)."""

    async def _discover_noting(self, config: Config) -> list[Target]:
        from llmtop.discovery.find import search_machine

        found = await search_machine(config)
        self.notes = list(found.notes)
        return list(found.targets)

    @property
    def searched(self) -> bool:
        """True once a search has finished."""
        return self._last is not None

    def mark_searched(self, notes: Sequence[str] = ()) -> None:
        """A search was made elsewhere (``Monitor.prefetch``'s thread, a face's first search
        with its ``notes``): the next is due in ``every_s``, the notes go to the event log."""
        self._last = self._clock()
        if notes:
            self.notes = list(notes)

    async def first(self) -> list[Target]:
        """Search now and wait for the answer (the first tick's targets)."""
        try:
            found = list(await self._find(self.config))
        except Exception:  # discovery never raises by design; a bug here is no crash
            return []
        else:
            self.searches += 1
            return found
        finally:
            self._last = self._clock()

    def poll(self) -> list[Target]:
        """What a finished background search found ([] when none finished), and a new
        search started when one is due."""
        found: list[Target] = []
        task = self._task
        if task is not None and task.done():
            self._task = None
            self._last = self._clock()
            if not task.cancelled() and task.exception() is None:
                found = list(task.result())
                self.searches += 1
        if self._task is None and (self._last is None
                                   or self._clock() - self._last >= self.every_s):
            self._task = asyncio.ensure_future(self._find(self.config))
        return found

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
