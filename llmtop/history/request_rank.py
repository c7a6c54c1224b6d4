"""The one ranking and the one median of single requests.

- Used by the request window (``history.request_window``) and by the findings that cite requests
  (``diagnose.request_citations``).
- ``ranked``: slowest first by one value, those without it last.
- ``median`` and ``nearest_rank``: the middle and a quantile of plain values.
- ``values``: one value of each request that has it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence

from llmtop.model.request_records import RequestRecord

__all__ = ["SORT_KEYS", "median", "nearest_rank", "ranked", "values"]

SORT_KEYS = ("ttft_s", "e2e_s", "queue_s", "prefill_s", "decode_s", "prompt_tokens",
             "output_tokens")
"""The values requests can be ranked by."""


def ranked(reqs: Sequence[RequestRecord], by: str, n: int | None = None
           ) -> list[RequestRecord]:
    """``reqs`` slowest first by ``by``; those without it last, in their order; the first
    ``n`` (all when None). Equal values keep their order."""
    if by not in SORT_KEYS:
        raise ValueError(f"cannot sort requests by {by!r} (one of {', '.join(SORT_KEYS)})")
    have = [r for r in reqs if getattr(r, by) is not None]
    if n is not None and n < len(have):
        return heapq.nlargest(n, have, key=lambda r: getattr(r, by))
    have.sort(key=lambda r: getattr(r, by), reverse=True)
    out = have + [r for r in reqs if getattr(r, by) is None]
    return out if n is None else out[:n]


def median(xs: Iterable[float]) -> float | None:
    """The middle value (the mean of the two middle ones); None when there are none."""
    s = sorted(xs)
    if not s:
        return None
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def nearest_rank(xs: Iterable[float], q: float) -> float | None:
    """Nearest-rank quantile ``q`` of the values; None when there are none."""
    s = sorted(xs)
    if not s:
        return None
    return s[max(0, math.ceil(q * len(s)) - 1)]


def values(reqs: Iterable[RequestRecord], key: str) -> list[float]:
    """``key`` of each request that has it, as floats, in order."""
    return [float(v) for r in reqs if (v := getattr(r, key)) is not None]
