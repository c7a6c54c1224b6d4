"""Watch an in-process demo through llmtop's own Scraper, Store and demo GPU sampler."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.gpu.demo import DemoGpuSampler
from llmtop.history.store import Store
from llmtop.model import EngineRow, Snapshot
from llmtop.parse import registry
from llmtop.sources.scrape import Scraper

__all__ = ["Watch", "watch"]


@dataclass
class Watch:
    """What a watch saw: the store, one snapshot per tick (10 s window), and tick times."""

    store: Store
    snaps: list[Snapshot] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def rows(self, engine: str) -> list[EngineRow]:
        """The row of the first target of ``engine`` at each tick."""
        return [next(r for r in s.engines if r.engine == engine) for s in self.snaps]

    def row(self, engine: str, t0: float, t1: float) -> EngineRow:
        """The row of ``engine`` over the window ``[t0, t1]`` (``llmtop.clock`` seconds)."""
        snap = self.store.snapshot(t1 - t0, t_mono=t1)
        return next(r for r in snap.engines if r.engine == engine)


async def watch(server, seconds: float, interval: float = 0.5) -> Watch:
    """Scrape every engine (and the demo GPUs) every ``interval`` s for ``seconds``, in
    ``llmtop.clock`` seconds (the demo's own clock: scaled where a test scales it)."""
    targets = tuple(Target(name=es.target, base_url=es.base_url, engine=es.kind,
                           host="127.0.0.1", port=es.port, timeout_s=2.0)
                    for es in server.sites)
    cfg = Config(targets=targets, interval_s=interval, timeout_s=2.0, discover=False)
    scraper = Scraper(cfg)
    gpus = DemoGpuSampler(server.gpu_url)
    store = Store(cfg, normalize=registry.normalize)
    w = Watch(store)
    try:
        t_end = clock.monotonic() + seconds
        while clock.monotonic() < t_end:
            raws = await asyncio.gather(*(scraper.scrape(t) for t in targets))
            for raw in raws:
                store.ingest(raw)
            store.ingest_gpus(await gpus.sample_async())
            now = clock.monotonic()
            w.snaps.append(store.commit(now, clock.time()))
            w.times.append(now)
            await clock.sleep(interval)
        return w
    finally:
        await scraper.aclose()
        await gpus.aclose()
