"""Row groups of the engines table, one fold mechanism for all of them (``grouped``):
fleet mode's per-model total rows, and the serving stack's routers with their backends
under them (through their prefill and decode pools when the router splits P/D).

A group is a head row (an ``EngineRow`` the table draws, sorts and filters like any other:
a router's carries its policy as ``model``, a pool's ``<role> pool`` as ``target``) and the
rows whose ``parent`` is its key; ``collapsed`` holds the head keys whose members are folded
away. What a row is comes from ``Groups.kind``, never from its key or target.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from llmtop.model import EngineRow, Quantiles
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.link import merge_backends
from llmtop.topology.pools import Pool, build_pools

__all__ = ["Groups", "RowKind", "fold_key", "grouped", "head_rows", "model_groups",
           "stack_groups"]


class RowKind(Enum):
    """What a row of the engines table stands for."""

    ENGINE = "engine"
    """An engine target's model (or rank): every row that heads no group."""
    MODEL_TOTAL = "model total"
    """Fleet mode's sum of one model's rows (``fleet.rows.model_totals``)."""
    ROUTER = "router"
    """A router, its backends' load summed under its own rate and latency."""
    POOL = "pool"
    """The prefill or decode pool behind a router that splits P/D."""


_POOL_ORDER = {"prefill": -2, "decode": -1}


def _router_key(target: str) -> str:
    return f"router|{target}"


def _pool_key(router: str | None, role: str) -> str:
    return f"pool|{router}|{role}"


@dataclass(slots=True)
class Groups:
    """Head rows, who belongs to whom, and what each stack row stands for."""

    heads: list[EngineRow] = field(default_factory=list)
    kinds: dict[str, RowKind] = field(default_factory=dict)
    """Head row key -> what it stands for (rows not here are engine rows)."""
    parent: dict[str, str] = field(default_factory=dict)
    """Row key (a member or a nested head) -> its head's key."""
    routers: dict[str, RouterRow] = field(default_factory=dict)
    """Router head key -> the router."""
    pools: dict[str, Pool] = field(default_factory=dict)
    """Pool head key -> the pool."""
    backends: dict[str, BackendRow] = field(default_factory=dict)
    """Engine row key -> its entry in its router's backend list."""

    def __add__(self, other: Groups) -> Groups:
        return Groups([*self.heads, *other.heads], {**self.kinds, **other.kinds},
                      {**self.parent, **other.parent}, {**self.routers, **other.routers},
                      {**self.pools, **other.pools}, {**self.backends, **other.backends})

    def kind(self, key: str) -> RowKind:
        """What the row ``key`` stands for."""
        return self.kinds.get(key, RowKind.ENGINE)

    def depth(self, key: str) -> int:
        """How many heads sit above ``key`` in the stack (model totals do not indent)."""
        n, k = 0, self.parent.get(key)
        while k is not None and self.kind(k) is not RowKind.MODEL_TOTAL and n < 4:
            n, k = n + 1, self.parent.get(k)
        return n


def model_groups(totals: Sequence[EngineRow], engines: Sequence[EngineRow]) -> Groups:
    """Fleet mode: one group per model total, holding that model's rows."""
    head = {t.model: t.key for t in totals}
    return Groups(heads=list(totals), kinds={t.key: RowKind.MODEL_TOTAL for t in totals},
                  parent={r.key: head[r.model] for r in engines
                          if r.model in head and r.router is None})


def _sum(vals) -> float | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None


def _router_head(router: RouterRow, rows: Sequence[EngineRow]) -> EngineRow:
    """The router's row: its own rate, TTFT and errors; its backends' load summed."""
    kv = [r.kv_cache_usage for r in rows if r.kv_cache_usage is not None]
    return EngineRow(
        key=_router_key(router.target), target=router.target, engine=router.engine,
        engine_version=router.engine_version, model=router.policy, state=router.state,
        error=router.error, http_status=router.http_status,
        last_ok_age_s=router.last_ok_age_s,
        running=_sum(r.running for r in rows), waiting=_sum(r.waiting for r in rows),
        max_running=_sum(r.max_running for r in rows),
        kv_cache_usage=sum(kv) / len(kv) if kv else None,
        ttft_s=router.ttft_s, e2e_s=router.request_s,
        generation_tokens_per_s=_sum(r.generation_tokens_per_s for r in rows),
        requests_per_s=router.requests_per_s, errors_per_s=router.errors_per_s)


def _pool_head(pool: Pool, rows: Sequence[EngineRow]) -> EngineRow:
    """A pool's row, summed like a model total: TTFT and ITL are the worst member's p95."""
    ttft = [r.ttft_s.p95 for r in rows if r.ttft_s is not None and r.ttft_s.p95 is not None]
    return EngineRow(
        key=_pool_key(pool.router, pool.role), target=f"{pool.role} pool",
        model=f"({len(pool.targets)})", state="ok" if pool.up else "down",
        running=pool.running, waiting=pool.waiting, max_running=pool.max_running,
        kv_cache_usage=pool.kv_usage,
        ttft_s=Quantiles(p95=max(ttft), mean=pool.ttft_mean_s) if ttft else None,
        itl_s=Quantiles(p95=pool.itl_p95_s) if pool.itl_p95_s is not None else None,
        queue_s=Quantiles(mean=pool.queue_mean_s, count=1.0)
        if pool.queue_mean_s is not None else None,
        prefill_s=Quantiles(mean=pool.prefill_mean_s, count=1.0)
        if pool.prefill_mean_s is not None else None,
        generation_tokens_per_s=pool.generation_tokens_per_s,
        requests_per_s=pool.requests_per_s)


def stack_groups(engines: Sequence[EngineRow], routers: Sequence[RouterRow]) -> Groups:
    """One group per router; its P/D pools (when it has prefill or decode backends) as
    groups inside it. Backends are the rows ``llmtop.topology`` linked to the router."""
    out = Groups()
    if not routers:
        return out
    rows = [r for r in engines if r.rank is None]
    pools = {(p.router, p.role): p for p in build_pools(rows)}
    for router in routers:
        head = _router_key(router.target)
        mine = [r for r in rows if r.router == router.target]
        out.heads.append(_router_head(router, mine))
        out.kinds[head] = RowKind.ROUTER
        out.routers[head] = router
        linked: dict[str, list[BackendRow]] = {}
        for b in router.backends:
            if b.target is not None:
                linked.setdefault(b.target, []).append(b)
        by_target = {t: merge_backends(bs) for t, bs in linked.items()}
        pd = any(r.role in ("prefill", "decode") for r in mine)
        for r in mine:
            if r.target in by_target:
                out.backends[r.key] = by_target[r.target]
            pool = pools.get((router.target, r.role or "")) if pd else None
            if pool is None:
                out.parent[r.key] = head
                continue
            pkey = _pool_key(router.target, pool.role)
            if pkey not in out.pools:
                out.pools[pkey] = pool
                out.kinds[pkey] = RowKind.POOL
                out.heads.append(_pool_head(pool, [m for m in mine if m.role == pool.role]))
                out.parent[pkey] = head
            out.parent[r.key] = pkey
    return out


def head_rows(groups: Groups, collapsed: Collection[str]) -> list[EngineRow]:
    """The head rows with their fold mark: ``▾`` open, ``▸`` folded."""
    return [replace(h, target=f"{'▸' if h.key in collapsed else '▾'} {h.target}")
            for h in groups.heads]


def grouped(flat: list[EngineRow], collapsed: Collection[str], groups: Groups
            ) -> list[EngineRow]:
    """Rows (already sorted) under their heads, heads in their sorted order, nested heads
    inside theirs; a folded head keeps its own row only; rows whose head is not shown (none,
    or filtered out) stay at the end."""
    shown = {r.key for r in flat if r.key in groups.kinds}
    children: dict[str | None, list[EngineRow]] = {}
    loose: list[EngineRow] = []
    for r in flat:
        p = groups.parent.get(r.key)
        if p in shown:
            children.setdefault(p, []).append(r)
        elif r.key in groups.kinds:
            children.setdefault(None, []).append(r)
        else:
            loose.append(r)
    for kids in children.values():  # a router's pools in path order: prefill, decode
        kids.sort(key=lambda r: _POOL_ORDER.get(pool.role, 0)
                  if (pool := groups.pools.get(r.key)) is not None else 0)
    out: list[EngineRow] = []

    def walk(key: str | None) -> None:
        for r in children.get(key, ()):
            out.append(r)
            if r.key in shown and r.key not in collapsed:
                walk(r.key)

    walk(None)
    return out + loose


def fold_key(groups: Groups, key: str) -> str | None:
    """The head a fold key acts on for the row ``key``: the row itself when it heads a
    group, else the group it sits in (None: not in any)."""
    if key in groups.kinds:
        return key
    return groups.parent.get(key)
