"""``--once``'s baseline: the engine's own lifetime before the window.

One ``--once`` has no history of its own, so no rule that compares with a usual value could
speak: a prefix-cache collapse needs "usually 84 %". The engine's cumulative counters at
llmtop's first scrape are its own past, before the window: the lifetime hit rate
(Δhits/Δqueries since start) and the lifetime mean prefill time (``_sum/_count``). Only
these: they are what ``prefix_cache_miss`` compares, and a lifetime ratio or mean is honest
for them. Latency quantiles and prompt lengths are not taken from a lifetime (a server idle
for hours, or one that served another mix, would make an ordinary window look like a
change). The window's own requests are not in it (it is read before the window). Pure.
"""

from __future__ import annotations

import math

from llmtop.diagnose.baseline import Baseline
from llmtop.diagnose.thresholds import MIN_REQUESTS
from llmtop.model import EngineRow, Quantiles

__all__ = ["LIFETIME_SIGNALS", "lifetime_baseline"]

LIFETIME_SIGNALS = ("hit_rate", "prefill_mean")
"""The signals ``lifetime_baseline`` gives (see the module doc)."""


def _finite(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def lifetime_baseline(row: EngineRow) -> Baseline | None:
    """The lifetime values of ``row`` (a row built from the first scrape) as a baseline, or
    None when the engine has served fewer than ``MIN_REQUESTS`` requests in its life (or
    reports none of ``LIFETIME_SIGNALS``)."""
    lt = row.lifetime
    if not lt:
        return None
    counts = [q.count for k in ("prompt_len", "ttft_s", "prefill_s")
              if isinstance(q := lt.get(k), Quantiles)]
    if not counts or max(counts) < MIN_REQUESTS:
        return None
    values: dict[str, float] = {}
    hit = _finite(lt.get("prefix_hit_rate"))
    if hit is not None:
        values["hit_rate"] = hit
    pre = lt.get("prefill_s")
    if isinstance(pre, Quantiles) and pre.count > 0 and (m := _finite(pre.mean)) is not None:
        values["prefill_mean"] = m
    if not values:
        return None
    span = _finite(lt.get("uptime_s")) or 0.0
    return Baseline(values, int(max(counts)), span, lifetime=True)
