"""Number values every row type shares: histograms, quantiles, JSON-safe floats.

- ``Hist``: a cumulative histogram as an engine or router exposes it, in base units.
- ``Quantiles``: a latency summary over one window.
- ``json_number``: a float for JSON (NaN and infinities become None).
- Kept apart from ``model`` and ``model.stack`` so both can use them and ``model`` can
  still name the stack's row types.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Hist", "Quantiles", "json_number"]


@dataclass(slots=True)
class Hist:
    """A cumulative histogram, as exposed by the engine, converted to base units.

    ``bounds`` are upper bounds ascending and end with ``math.inf``; ``cumulative[i]`` is
    the number of observations ``<= bounds[i]``. A mean-only series (Triton's microsecond
    counters) has ``bounds == ()`` and only ``sum``/``count``.
    """

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum: float
    count: float


def json_number(v: float | None) -> float | None:
    """JSON-safe float: NaN/Inf become None."""
    if v is None or math.isnan(v) or math.isinf(v):
        return None
    return v


@dataclass(slots=True)
class Quantiles:
    """Latency summary over one window, in seconds.

    ``below`` names quantiles whose value is only an upper bound (all observations fell in
    the lowest bucket: show "<value"); ``above`` names quantiles that fell in the +Inf
    bucket (value is the last finite bound: show ">value").
    """

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    count: float = 0.0
    below: tuple[str, ...] = ()
    above: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "p50": json_number(self.p50),
            "p90": json_number(self.p90),
            "p95": json_number(self.p95),
            "p99": json_number(self.p99),
            "mean": json_number(self.mean),
            "count": self.count,
            "below": list(self.below),
            "above": list(self.above),
        }
