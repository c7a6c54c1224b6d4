"""A monitor over demo engines whose samples carry a clock the benchmark moves, so hours of
history fill in seconds (used by history_cost.py and diagnose_cost.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from llmtop.config import Config
from llmtop.monitor import Monitor

__all__ = ["fast_forward_monitor"]


def fast_forward_monitor(demo, clock: list[float]) -> Monitor:
    """A Monitor of ``demo``'s targets; every scrape and GPU sample is stamped with
    ``clock`` = [t_mono, t_wall] as the caller sets it."""
    config = demo.apply(Config(interval_s=1.0, discover=False))
    mon = Monitor.from_config(config, SimpleNamespace(gpu_url=demo.info["gpu_url"]))
    scrape = mon.scraper.scrape

    async def stamped(target):
        raw = await scrape(target)
        return dataclasses.replace(raw, t_mono=clock[0], t_wall=clock[1])

    mon.scraper.scrape = stamped
    if mon._gpu is not None:
        sample = mon._gpu.sample
        mon._gpu.sample = lambda: dataclasses.replace(sample(), t_mono=clock[0],
                                                      t_wall=clock[1])
    return mon
