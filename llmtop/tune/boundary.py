"""The SLA boundary of one trial: the highest load meeting every SLO, by doubling then
bisecting (a handful of levels), starting near the engine's own running limit.

``next_level`` is pure: given the levels measured so far (load -> met), the next load to
measure, or None when the boundary is pinned down.
"""

from __future__ import annotations

import math
from typing import Any

from llmtop.loadgen.knee import sla_boundary

__all__ = ["MAX_LEVELS", "level_met", "next_level", "start_level"]

MAX_LEVELS = 8
"""Levels per trial at most."""
BISECT_SHARE = 0.2
"""The bisection stops when the gap between met and missed is at most this share of the
met load (or one request)."""


def start_level(seats: float | None, max_load: float) -> float:
    """Half the running limit when it is known (it should pass), else 1."""
    return float(min(max_load, max(1, int(seats // 2)))) if seats else 1.0


def _close_enough(lo: float, hi: float, rate: bool) -> bool:
    """The stop rule: met and missed at most ``BISECT_SHARE`` of the met load apart (or one
    request of concurrency)."""
    return hi - lo <= (BISECT_SHARE * lo + 1e-9 if rate else max(1.0, BISECT_SHARE * lo))


def next_level(met: dict[float, bool], start: float, max_load: float, *,
               rate: bool = False, hinted: bool = False) -> float | None:
    """The next load to measure: double while met, halve while not, then bisect.
    ``hinted``: ``start`` was a prediction (``tune.hint``), so the second level checks it
    from the other side at the stop rule's distance (met: just above; missed: just below),
    and the usual walk goes on from there only when the prediction was off."""
    if len(met) >= MAX_LEVELS:
        return None
    if not met:
        return start
    floor = 0.25 if rate else 1.0
    if hinted and len(met) == 1 and start in met:
        if met[start]:
            nxt = (round(start * (1 + BISECT_SHARE), 3) if rate
                   else start + max(1.0, float(int(BISECT_SHARE * start))))
            return None if start >= max_load else min(max_load, nxt)
        nxt = (round(start / (1 + BISECT_SHARE), 3) if rate
               else float(min(start - 1, math.ceil(start / (1 + BISECT_SHARE)))))
        return None if nxt < floor or nxt >= start else nxt
    ok = [x for x, m in met.items() if m]
    lo = max(ok) if ok else None
    bad = [x for x, m in met.items() if not m and (lo is None or x > lo)]
    hi = min(bad) if bad else None
    if hi is None:
        assert lo is not None
        nxt = min(max_load, lo * 2)
        return None if nxt <= lo else nxt
    if lo is None:
        nxt = hi / 2 if rate else float(int(hi // 2))
        return None if nxt < floor or nxt in met else nxt
    if _close_enough(lo, hi, rate):
        return None
    if rate:
        return round((lo + hi) / 2, 3)
    mid = float(int((lo + hi) // 2))
    return None if mid in met else mid


def level_met(step: dict[str, Any], slo: dict[str, float | None], max_error_rate: float,
              best_below: float | None, *, rate: bool = False) -> bool:
    """A level meets the SLOs (p95 of each set SLO, errors within bound); with no SLO set,
    it counts while its throughput still grows by 5 % over the best lower level. A rate
    level the load generator could not hold (``client_bound``: late or short) never counts:
    the engine was not offered that rate."""
    if rate and step.get("client_bound"):
        return False
    if any(v is not None for v in slo.values()):
        sla = sla_boundary([step], slo, max_error_rate)
        return bool(sla and sla.get("met"))
    tok = step.get("output_tokens_per_s") or 0.0
    return step.get("error_rate", 0.0) <= max_error_rate and (
        best_below is None or tok >= 1.05 * best_below)

