"""Counters and Prometheus-style histograms of one simulated engine (``Stats``, ``Hist``).

The format modules render them at scrape time; bucket bounds come from each engine's format.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence

from llmtop import clock

__all__ = ["Hist", "Stats"]


class Hist:
    """A Prometheus-style histogram: ``counts[i]`` observations ``<= bounds[i]`` (last: +Inf)."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: Sequence[float]):
        self.bounds = tuple(bounds)
        self.counts = [0.0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0.0

    def observe(self, v: float, n: float = 1.0) -> None:
        self.counts[bisect_left(self.bounds, v)] += n
        self.sum += v * n
        self.count += n

    def cumulative(self) -> list[float]:
        out, acc = [], 0.0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


class Stats:
    """Counters and histograms of one engine since its (simulated) process start.

    ``hist_bounds`` names the histograms the engine exposes; observations of other names are
    dropped. Keys in ``split`` are also kept per ``is_streaming`` (``key:true``/``key:false``).
    """

    def __init__(self, hist_bounds: dict[str, Sequence[float]],
                 split: frozenset[str] = frozenset()):
        self.bounds = hist_bounds
        self.split = split
        self.c: defaultdict[str, float] = defaultdict(float)
        self.h: dict[str, Hist] = {}
        self.created = clock.time()

    def inc(self, key: str, v: float = 1.0, streaming: bool | None = None) -> None:
        self.c[key] += v
        if streaming is not None and key in self.split:
            self.c[f"{key}:{'true' if streaming else 'false'}"] += v

    def obs(self, key: str, v: float, n: float = 1.0, streaming: bool | None = None) -> None:
        b = self.bounds.get(key)
        if b is None:
            return
        if key in self.split:
            key = f"{key}:{'true' if streaming else 'false'}"
        h = self.h.get(key)
        if h is None:
            h = self.h[key] = Hist(b)
        h.observe(v, n)

    def hist(self, key: str) -> Hist:
        """The histogram ``key`` (an empty one when never observed)."""
        h = self.h.get(key)
        if h is None:
            h = self.h[key] = Hist(self.bounds.get(key.split(":")[0], ()))
        return h
