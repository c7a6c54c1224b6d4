"""``imbalance``: replicas of one model (or data-parallel ranks of one engine) carry very
different load. Reported on the overloaded one."""

from __future__ import annotations

from collections.abc import Sequence

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import (
    IMB_KV_GAP,
    IMB_RUNNING_ABS,
    IMB_RUNNING_X,
    IMB_WAITING_MIN,
)
from llmtop.model import EngineRow

__all__ = ["imbalance", "overloaded"]


def _median(vals: list[float]) -> float:
    vals = sorted(vals)
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def overloaded(r: EngineRow, sibs: Sequence[EngineRow], waiting: float | None
               ) -> tuple[str, list[Evidence]] | None:
    """Why ``r`` carries far more than ``sibs`` (words, evidence), or None."""
    if not sibs:
        return None
    sw = [s.waiting for s in sibs if s.waiting is not None]
    if waiting is not None and waiting >= IMB_WAITING_MIN and sw and max(sw) == 0:
        return (f"{waiting:.0f} waiting while its {len(sibs)} sibling(s) have none",
                [Evidence("waiting", waiting, "now", None, IMB_WAITING_MIN),
                 Evidence("siblings.waiting_max", max(sw), "now")])
    sr = [s.running for s in sibs if s.running is not None]
    if r.running is not None and sr:
        med = _median(sr)
        if r.running >= IMB_RUNNING_X * med and r.running - med >= IMB_RUNNING_ABS:
            return (f"{r.running:.0f} running vs {med:.0f} on its sibling(s)",
                    [Evidence("running", r.running, "now", None, IMB_RUNNING_X * med),
                     Evidence("siblings.running_median", med, "now")])
    sk = [s.kv_cache_usage for s in sibs if s.kv_cache_usage is not None]
    kv = r.kv_cache_usage
    if kv is not None and sk and kv - max(sk) >= IMB_KV_GAP:
        return (f"KV {fmt_pct(kv)} vs at most {fmt_pct(max(sk))} on its sibling(s)",
                [Evidence("kv", kv, "now", None, max(sk) + IMB_KV_GAP),
                 Evidence("siblings.kv_max", max(sk), "now")])
    return None


def imbalance(c: RowCtx) -> list[Finding]:
    """This replica against the other replicas of its model, and its ranks against each other."""
    row = c.row
    waiting = row.waiting
    if c.waiting_min is not None and waiting is not None:
        waiting = min(waiting, c.waiting_min)  # a queue seen all window long, not a blip
    got = overloaded(row, c.siblings, waiting)
    if got is not None:
        words, ev = got
        return [c.finding("imbalance", "warn", f"replica of {row.model} overloaded: {words}",
                          ev, "the router spreads load unevenly (session affinity, unequal "
                          "replicas, round-robin): fix it in the router")]
    ranks = [r for r in row.ranks if r.rank is not None]
    for r in ranks:
        got = overloaded(r, [s for s in ranks if s is not r], r.waiting)
        if got is not None:
            words, ev = got
            return [c.finding("imbalance", "warn", f"data-parallel rank {r.rank} overloaded: "
                              f"{words}", ev, "the engine's DP load balancing or its router "
                              "favours one rank")]
    return []
