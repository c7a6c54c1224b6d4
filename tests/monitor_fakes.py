"""Bases for the monitor's test collaborators: every method of ``monitor.ports.Scraper`` and
``gpu.GpuSampler``, doing nothing; a fake overrides what its test is about."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llmtop import clock
from llmtop.config import Target
from llmtop.model import SCRAPE_HEALTH, SCRAPE_SLOTS, SCRAPE_WORKERS, GpuSample, RawScrape

__all__ = ["FakeSamplerBase", "FakeScraperBase"]


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
