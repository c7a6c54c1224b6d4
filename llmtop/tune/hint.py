"""Where a trial's boundary search starts, predicted from the trials already measured (the
adaptive search only; ``strategy = "grid"`` measures every configuration from scratch).

A configuration that differs from a measured one only in the seat limit, where that one was
seat-bound, is predicted to hold proportionally more or less: running was pinned at its
limit with KV room, so the limit is what admitted requests. One that differs only in a
memory setting from a seat-bound one is predicted to hold the same (it was not the memory
that limited). Anything else has no prediction. ``next_level(..., hinted=True)`` then checks
the prediction from the other side at the stop rule's distance: a good one pins the
boundary in two levels, a wrong one costs one level before the usual walk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from llmtop.tune.limiter import is_rate, load_text
from llmtop.tune.rules import MEMORY_PARAMS, SEAT_PARAMS, pair

__all__ = ["start_hint"]


def start_hint(params: dict[str, Any], done: Iterable[dict[str, Any]], max_load: float, *,
               rate: bool = False) -> tuple[float, str] | None:
    """``(load, why)``: the predicted SLA load of ``params`` from the closest seat-bound
    neighbour, or None."""
    best: tuple[float, float, str] | None = None  # (distance, load, why)
    for t in done:
        if t.get("status") != "measured":
            continue
        lim = (t.get("limiter") or {}).get("kind")
        sla = t.get("sla_load")
        if lim != "seats" or not sla or is_rate(t) != rate:
            continue
        got = _predict(params, t, float(sla), rate)
        if got is not None and (best is None or got[0] < best[0]):
            best = got
    if best is None:
        return None
    load = min(max_load, best[1])
    return load, best[2]


def _predict(params: dict[str, Any], t: dict[str, Any], sla: float, rate: bool
             ) -> tuple[float, float, str] | None:
    at = load_text(sla, rate)
    p = pair(params, t, SEAT_PARAMS)
    if p is not None and p[1] > 0 and p[2] > 0:
        name, mine, theirs = p
        raw = sla * mine / theirs
        load = round(raw, 3) if rate else float(max(1, round(raw)))
        why = (f"{name}={theirs:g} was seat-bound and held {at}; scaled to {name}={mine:g}: "
               f"{load_text(load, rate)}")
        return abs(math.log(mine / theirs)), load, why
    p = pair(params, t, MEMORY_PARAMS)
    if p is not None:
        name, mine, theirs = p
        why = (f"{name}={theirs:g} was seat-bound (not memory-bound) and held {at}; the same "
               f"seats with {name}={mine:g}: {at}")
        return 1.0 + abs(math.log(mine / theirs)) if mine > 0 and theirs > 0 else 1.0, sla, why
    return None
