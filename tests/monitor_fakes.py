"""Bases for the monitor's test collaborators: every method of ``monitor.ports.Scraper``,
``gpu.GpuSampler`` and ``monitor.ports.LogFollower``, doing nothing; a fake overrides what
its test is about (``FakeLogs`` records what it was told and drains what a test queued)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llmtop import clock
from llmtop.config import Target
from llmtop.model import (
    SCRAPE_HEALTH,
    SCRAPE_SLOTS,
    SCRAPE_WORKERS,
    GpuSample,
    LogLocation,
    RawLog,
    RawScrape,
)

__all__ = ["FakeLogs", "FakeSamplerBase", "FakeScraperBase"]


def _unserved(target: Target, url: str, kind: str) -> RawScrape:
    return RawScrape(target=target.name, url=url, t_wall=clock.time(), t_mono=clock.monotonic(),
                     status="down", error="not served by this fake", kind=kind)


class FakeScraperBase:
    """A scraper that serves nothing but ``identify`` (the target's host)."""

    async def scrape(self, target: Target) -> RawScrape:
        raise NotImplementedError

    async def identify(self, target: Target) -> dict[str, Any]:
        return {"host": target.host}

    def identity_pending(self, target_name: str) -> bool:
        return False

    def reidentify(self, target_name: str) -> None:
        return None

    async def slots(self, target: Target) -> RawScrape:
        return _unserved(target, target.base_url + "/slots", SCRAPE_SLOTS)

    async def workers(self, target: Target) -> RawScrape:
        return _unserved(target, target.base_url + "/workers", SCRAPE_WORKERS)

    def health_url(self, target: Target, engine: str | None) -> str | None:
        return None

    async def health(self, target: Target, url: str) -> RawScrape:
        return _unserved(target, url, SCRAPE_HEALTH)

    async def aclose(self) -> None:
        return None


class FakeSamplerBase:
    """A sampler whose ``sample`` blocks (asked in a worker thread), never held."""

    def held_sample(self) -> GpuSample | None:
        return None

    def sample(self) -> GpuSample:
        raise NotImplementedError

    async def sample_async(self) -> GpuSample:
        return await asyncio.to_thread(self.sample)

    def set_targets(self, targets: Sequence[Target]) -> None:
        return None

    def close(self) -> None:
        return None

    async def aclose(self) -> None:
        self.close()


class FakeLogs:
    """A log follower that follows nothing: it records ``follow``/``forget``/``close`` and
    drains the ``RawLog``s a test put in ``queued``."""

    def __init__(self) -> None:
        self.following: dict[str, LogLocation] = {}
        self.calls: list[tuple[str, str]] = []
        self.queued: list[RawLog] = []
        self.closed = False

    def follow(self, target: str, where: LogLocation) -> None:
        self.following[target] = where
        self.calls.append(("follow", target))

    def forget(self, target: str) -> None:
        self.following.pop(target, None)
        self.calls.append(("forget", target))

    def drain(self) -> list[RawLog]:
        out, self.queued = self.queued, []
        return out

    def close(self) -> None:
        self.closed = True
