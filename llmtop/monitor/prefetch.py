"""Start-up prefetch: the first tick's scrapes and GPU sample, in a thread of their own.

- ``Prefetch.start``: a thread with its own event loop and its own ``Scraper`` scrapes every
  target once (after a first search for engines, where there is one) and takes a first GPU
  sample (``sample``, which may block: NVML's start-up) while the caller imports the UI.
- ``Prefetch.take``: the first tick takes what it found (a target not answered by then is
  scraped as usual); identity comes with a later scrape, as it would anyway.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable

from llmtop.config import Config, Target
from llmtop.model import GpuSample, RawScrape
from llmtop.monitor.ports import GpuSampler

__all__ = ["First", "Prefetch"]

First = tuple[dict[str, RawScrape], GpuSample | None]
"""What the prefetch found: target name -> its scrape, and the GPU sample (or None)."""


class Prefetch:
    """The start-up fetch's thread and its result, taken once by the first tick."""

    def __init__(self) -> None:
        self._result: concurrent.futures.Future[First] | None = None
        self.running: concurrent.futures.Future[First] | None = None
        """The taken result while its GPU sample may still run (no second sample beside
        it); cleared by the tick once it is done."""

    @property
    def pending(self) -> bool:
        """True from ``start`` until the first tick ``take``\\ s the result."""
        return self._result is not None

    def start(self, config: Config, targets: list[Target], gpu: GpuSampler | None,
              limit: float, search: Callable[[], Awaitable[list[Target]]] | None = None
              ) -> None:
        """Start the thread: ``search`` first (its engines are scraped too), then one scrape
        of each target and the GPU sample, for at most ``limit`` seconds."""
        fut: concurrent.futures.Future[First] = concurrent.futures.Future()

        async def fetch() -> First:
            if search is not None:
                targets.extend(await search())
            return await _first_fetch(config, targets, gpu, limit)

        def run() -> None:
            try:
                fut.set_result(asyncio.run(fetch()))
            except BaseException as exc:  # the first tick scrapes as usual
                fut.set_exception(exc)

        threading.Thread(target=run, name="llmtop-first-scrape", daemon=True).start()
        self._result = fut

    async def take(self, limit: float) -> First:
        """The prefetch's answers (waiting up to ``limit`` seconds); raises what it raised."""
        fut, self._result = self._result, None
        if fut is None:
            return {}, None
        self.running = fut
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), limit)

    def result(self, timeout: float | None = None) -> First:
        """Wait for the thread (tests)."""
        assert self._result is not None
        return self._result.result(timeout=timeout)

    def gpu_busy(self) -> bool:
        """True while the taken prefetch's GPU sample may still run."""
        if self.running is not None and self.running.done():
            self.running = None
        return self.running is not None


async def _first_fetch(config: Config, targets: list[Target], gpu: GpuSampler | None,
                       limit: float) -> First:
    """The thread's work: one scrape of each target (at most ``limit`` seconds) and, unless
    the sampler answers at once, its first sample beside them."""
    from llmtop.sources.scrape import Scraper

    scraper = Scraper(config, defer_identity=True)
    gpu_task = None
    if gpu is not None and gpu.held_sample() is None:
        gpu_task = asyncio.ensure_future(asyncio.to_thread(gpu.sample))
    tasks = {t.name: asyncio.ensure_future(scraper.scrape(t)) for t in targets}
    try:
        waiting = [*tasks.values(), *([gpu_task] if gpu_task is not None else [])]
        await asyncio.wait(waiting, timeout=limit)
        raws = {n: t.result() for n, t in tasks.items()
                if t.done() and not t.cancelled() and t.exception() is None}
        sample = None
        if gpu_task is not None and gpu_task.done() and not gpu_task.cancelled():
            sample = gpu_task.result() if gpu_task.exception() is None else None
        return raws, sample
    finally:
        for t in tasks.values():
            t.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        await scraper.aclose()
