"""Prefill and decode pools, each summed like a model group (rows in, pools out).

A pool is the engine rows of one role behind one router (rows without a router but with a
role form a pool of their own). Prefill pools are read by their queue and prefill time,
decode pools by running, KV and ITL. Sums skip unknown members' values but say how many
members reported (``None`` when none did).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from llmtop.model import GOOD_STATES, EngineRow, Quantiles

__all__ = ["Pool", "build_pools", "mean_of"]


@dataclass(slots=True)
class Pool:
    """The engine rows of one role behind one router, summed."""

    router: str | None
    role: str
    targets: list[str] = field(default_factory=list)
    up: int = 0
    """Members whose scrape is good (ok / restarted)."""
    waiting: float | None = None
    running: float | None = None
    max_running: float | None = None
    kv_usage: float | None = None
    """Mean KV usage of the members that report it (0..1)."""
    requests_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    queue_mean_s: float | None = None
    prefill_mean_s: float | None = None
    ttft_mean_s: float | None = None
    itl_p95_s: float | None = None
    """The worst member's ITL p95 (p95s do not add)."""

    @property
    def key(self) -> str:
        """``router|role`` (``-|role`` without a router)."""
        return f"{self.router or '-'}|{self.role}"

    @property
    def busy(self) -> float | None:
        """(running + waiting) / running limit: above 1 the pool queues."""
        if self.max_running is None or self.max_running <= 0 or self.running is None:
            return None
        return (self.running + (self.waiting or 0.0)) / self.max_running


def _sum(vals: Iterable[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def mean_of(qs: Iterable[Quantiles | None]) -> float | None:
    """The mean over several rows' windowed quantiles, weighted by their counts."""
    total = n = 0.0
    for q in qs:
        if q is None or q.mean is None or not q.count:
            continue
        total += q.mean * q.count
        n += q.count
    return total / n if n > 0 else None


def _pool(router: str | None, role: str, rows: Sequence[EngineRow]) -> Pool:
    kv = [r.kv_cache_usage for r in rows if r.kv_cache_usage is not None]
    itl = [r.itl_s.p95 for r in rows if r.itl_s is not None and r.itl_s.p95 is not None]
    return Pool(
        router=router, role=role, targets=[r.target for r in rows],
        up=sum(1 for r in rows if r.state in GOOD_STATES),
        waiting=_sum(r.waiting for r in rows), running=_sum(r.running for r in rows),
        max_running=_sum(r.max_running for r in rows),
        kv_usage=sum(kv) / len(kv) if kv else None,
        requests_per_s=_sum(r.requests_per_s for r in rows),
        generation_tokens_per_s=_sum(r.generation_tokens_per_s for r in rows),
        queue_mean_s=mean_of(r.queue_s for r in rows),
        prefill_mean_s=mean_of(r.prefill_s for r in rows),
        ttft_mean_s=mean_of(r.ttft_s for r in rows),
        itl_p95_s=max(itl) if itl else None)


def build_pools(engines: Sequence[EngineRow]) -> list[Pool]:
    """One pool per (router, role) among rows with a role (rank rows are folded already)."""
    groups: dict[tuple[str | None, str], list[EngineRow]] = {}
    for r in engines:
        if r.role is not None and r.rank is None:
            groups.setdefault((r.router, r.role), []).append(r)
    return [_pool(router, role, rows) for (router, role), rows in groups.items()]
