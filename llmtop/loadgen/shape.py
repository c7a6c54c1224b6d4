"""Length distributions taken from an engine's own histograms (pure: no I/O, no clock).

A ``LengthDist`` is a token-length histogram: bucket upper bounds (ascending, the last one
may be ``inf``) and the number of requests in each bucket (not cumulative). It is built from
two cumulative ``model.Hist`` readings (the window between them) or from one (lifetime).

Drawing a length: pick a bucket by its share, then a value uniformly in log space between
the bucket's bounds (``(lo, hi]``, integers, at least 1). The open top bucket ends at
``cap`` (the model's context) when known, else at twice its lower bound.

Quantiles shown to people are read off the same histogram (log-space interpolation inside
a bucket, so they agree with what is drawn); the mean is the histogram's exact
``sum / count``.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Any

from llmtop.model import Hist

__all__ = ["QUANTILES", "LengthDist", "ShapeError", "window_dist"]

QUANTILES = (0.1, 0.5, 0.9, 0.99)


class ShapeError(ValueError):
    """A histogram that cannot describe any traffic (empty window, no buckets)."""


@dataclass(frozen=True, slots=True)
class LengthDist:
    """Token lengths as a histogram: ``counts[i]`` requests in ``(bounds[i-1], bounds[i]]``."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float = 0.0
    """Sum of all lengths (the histogram's ``_sum``), for the exact mean; 0 when unknown."""

    @property
    def count(self) -> float:
        return sum(self.counts)

    @property
    def mean(self) -> float | None:
        n = self.count
        return self.total / n if n > 0 and self.total > 0 else None

    def _edges(self, i: int, cap: float | None) -> tuple[float, float]:
        lo = self.bounds[i - 1] if i > 0 else 0.0
        hi = self.bounds[i]
        if math.isinf(hi):
            hi = cap if cap is not None and cap > lo else max(2.0 * lo, lo + 1.0)
        return lo, hi

    def sample(self, rng: random.Random, cap: float | None = None) -> int:
        """One length: a bucket by its share, then log-uniform inside it; ``1 <= n``,
        and ``n <= cap`` when a cap is given."""
        cum = self._cum()
        i = bisect.bisect_right(cum, rng.random() * cum[-1])
        i = min(i, len(self.counts) - 1)
        lo, hi = self._edges(i, cap)
        low = max(lo, 1.0)
        if hi <= low:
            n = int(hi)
        else:
            n = round(math.exp(rng.uniform(math.log(low), math.log(hi))))
            n = min(int(hi), max(math.floor(lo) + 1, n))
        if cap is not None:
            n = min(n, int(cap))
        return max(1, n)

    def _cum(self) -> list[float]:
        out, acc = [], 0.0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out

    def quantile(self, q: float, cap: float | None = None) -> float | None:
        """The ``q`` quantile read off the histogram (log-space inside the bucket)."""
        cum = self._cum()
        if not cum or cum[-1] <= 0:
            return None
        rank = q * cum[-1]
        i = min(bisect.bisect_left(cum, rank), len(cum) - 1)
        lo, hi = self._edges(i, cap)
        before = cum[i - 1] if i > 0 else 0.0
        frac = (rank - before) / self.counts[i] if self.counts[i] > 0 else 1.0
        low = max(lo, 1.0)
        if hi <= low:
            return hi
        return math.exp(math.log(low) + frac * (math.log(hi) - math.log(low)))

    def describe(self, cap: float | None = None) -> dict[str, Any]:
        """JSON for reports: the buckets, request count, mean and quantiles."""
        return {"bounds": [b if math.isfinite(b) else None for b in self.bounds],
                "counts": list(self.counts), "requests": self.count, "mean": self.mean,
                "quantiles": {f"p{round(q * 100)}": self.quantile(q, cap) for q in QUANTILES}}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LengthDist:
        bounds = tuple(math.inf if b is None else float(b) for b in d["bounds"])
        counts = tuple(float(c) for c in d["counts"])
        mean = d.get("mean")
        return cls(bounds, counts, (mean or 0.0) * sum(counts))


def window_dist(new: Hist, old: Hist | None = None) -> tuple[LengthDist, bool]:
    """The histogram of the requests between ``old`` and ``new`` (lifetime when ``old`` is
    None). Returns ``(dist, reset)``: ``reset`` is True when the counters went backwards
    (a restart), in which case the window is ``new``'s lifetime. Raises ``ShapeError``."""
    if not new.bounds:
        raise ShapeError("the histogram has no buckets (a mean-only series)")
    reset = False
    cum = list(new.cumulative)
    total = new.sum
    if old is not None and old.bounds == new.bounds:
        diff = [a - b for a, b in zip(new.cumulative, old.cumulative, strict=True)]
        if any(d < 0 for d in diff) or new.sum < old.sum:
            reset = True
        else:
            cum, total = diff, new.sum - old.sum
    elif old is not None:
        reset = True  # the bucket layout changed: the engine restarted with other buckets
    counts = [cum[0]] + [max(0.0, cum[i] - cum[i - 1]) for i in range(1, len(cum))]
    if sum(counts) <= 0:
        raise ShapeError("no requests finished in the window")
    return LengthDist(tuple(new.bounds), tuple(counts), total), reset
