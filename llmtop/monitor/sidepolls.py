"""Side polls: the GETs beside the metrics scrape, one table entry per kind.

A ``PollKind`` says:

- when it is wanted for a target (``wanted``: from the target, its engine and the rows of the
  latest commit),
- how often (``every_s``: None for every tick, else at most once per that many seconds),
- what it fetches (``fetch``: a scraper call, or None when there is nothing to ask).

``POLLS`` holds llama-server's ``/slots``, an sglang-router's ``/workers`` and the health
endpoint of a row that may be stuck. ``SidePolls`` keeps at most one poll per kind and target
in flight. Adding a side poll: one ``PollKind`` here, its fetch in the scraper, its kind in
``model.SCRAPE_KINDS`` and its ingestion in ``history.sidepolls``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from llmtop import clock
from llmtop.config import Target
from llmtop.model import SCRAPE_HEALTH, SCRAPE_SLOTS, SCRAPE_WORKERS, RawScrape
from llmtop.monitor.ports import Scraper

__all__ = ["POLLS", "WORKERS_EVERY_S", "PollContext", "PollKind", "SidePolls"]

WORKERS_EVERY_S = 10.0
"""A router's worker list (roles) changes with its pool, not every refresh: asked this often
(the store keeps the last answer between polls)."""


@dataclass(frozen=True, slots=True)
class PollContext:
    """What a poll kind may look at to decide whether it is wanted."""

    engine_of: Callable[[str], str | None]
    """The engine a target was detected (or hinted) as (``Store.engine_of``)."""
    stuck: frozenset[str] = frozenset()
    """Targets with a row that may be stuck in the latest commit
    (``diagnose.rules.stuck.wants_health``)."""


@dataclass(frozen=True, slots=True)
class PollKind:
    """One side poll: when it is wanted, how often, what it fetches."""

    kind: str
    """``RawScrape.kind`` of its answers (``model.SCRAPE_KINDS``)."""
    what: str
    """Its name in an error event ("/slots poll failed: ...")."""
    wanted: Callable[[Target, PollContext], bool]
    fetch: Callable[[Scraper, Target, PollContext], Awaitable[RawScrape] | None]
    """The fetch to run, or None when there is nothing to ask (no health URL known)."""
    every_s: float | None = None
    """None: every tick; else at most once per ``every_s`` seconds per target."""
    now_of_rows: bool = False
    """True: its answer stands for this tick's rows (the commit takes its time)."""


def _health_fetch(scraper: Scraper, t: Target, ctx: PollContext) -> Awaitable[RawScrape] | None:
    url = scraper.health_url(t, ctx.engine_of(t.name))
    return scraper.health(t, url) if url is not None else None


SLOTS = PollKind(
    SCRAPE_SLOTS, "/slots poll",
    wanted=lambda t, ctx: ctx.engine_of(t.name) == "llamacpp",
    fetch=lambda scraper, t, ctx: scraper.slots(t))
WORKERS = PollKind(
    SCRAPE_WORKERS, "/workers poll",
    wanted=lambda t, ctx: bool(t.api_url) and ctx.engine_of(t.name) == "sglang-router",
    fetch=lambda scraper, t, ctx: scraper.workers(t), every_s=WORKERS_EVERY_S)
HEALTH = PollKind(
    SCRAPE_HEALTH, "health check",
    wanted=lambda t, ctx: t.name in ctx.stuck,
    fetch=_health_fetch, now_of_rows=True)

POLLS: tuple[PollKind, ...] = (SLOTS, WORKERS, HEALTH)
"""Every side poll, in the order their answers are fed."""


@dataclass
class SidePolls:
    """The side polls in flight (at most one per kind and target) and when each was asked."""

    kinds: tuple[PollKind, ...] = POLLS
    now: Callable[[], float] = field(default=lambda: clock.monotonic())
    """The clock throttles read (``llmtop.clock``: scaled with the demo's time)."""
    _flight: dict[tuple[str, str], asyncio.Future[RawScrape]] = field(default_factory=dict)
    _asked: dict[tuple[str, str], float] = field(default_factory=dict)

    def start(self, scraper: Scraper, targets: Iterable[Target], ctx: PollContext,
              kinds: Iterable[PollKind] | None = None) -> None:
        """Start each wanted poll (of ``kinds``, default all) that is due and not in flight."""
        now = self.now()
        for kind in self.kinds if kinds is None else kinds:
            for t in targets:
                key = (kind.kind, t.name)
                if key in self._flight or not kind.wanted(t, ctx):
                    continue
                if kind.every_s is not None and now - self._asked.get(key, -kind.every_s) \
                        < kind.every_s:
                    continue
                job = kind.fetch(scraper, t, ctx)
                if job is None:
                    continue
                self._asked[key] = now
                self._flight[key] = asyncio.ensure_future(job)

    def waiting(self, kinds: Iterable[PollKind] | None = None) -> list[asyncio.Future[RawScrape]]:
        """The polls in flight (of ``kinds``, default all)."""
        names = None if kinds is None else {k.kind for k in kinds}
        return [f for (k, _), f in self._flight.items() if names is None or k in names]

    def done(self, kinds: Iterable[PollKind] | None = None
             ) -> list[tuple[PollKind, str, asyncio.Future[RawScrape]]]:
        """Take the finished polls (of ``kinds``): (kind, target, future), in table order."""
        out = []
        for kind in self.kinds if kinds is None else kinds:
            for key, fut in list(self._flight.items()):
                if key[0] == kind.kind and fut.done():
                    del self._flight[key]
                    out.append((kind, key[1], fut))
        return out

    def forget(self, target: str) -> None:
        """A target no longer watched: its polls in flight are cancelled, its throttle
        times go."""
        for key in [k for k in self._flight if k[1] == target]:
            self._flight.pop(key).cancel()
        for key in [k for k in self._asked if k[1] == target]:
            del self._asked[key]

    def cancel(self) -> list[asyncio.Future[RawScrape]]:
        """Cancel every poll in flight; returns them (to be awaited)."""
        out = list(self._flight.values())
        self._flight.clear()
        for f in out:
            f.cancel()
        return out
