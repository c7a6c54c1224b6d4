"""``imbalance``: replicas of one model (or data-parallel ranks of one engine) carry very
different load. Reported on the overloaded one, naming its idle siblings.

A replica is overloaded only beside **idle** siblings (nothing waiting, KV below
``IMB_KV_ROOM``): a replica with room next to a sibling that queues or is full is not the
one in trouble (the sibling is; its own rules say why), and siblings that are all busy mean
the model is short of capacity, not badly routed. Against the idle siblings it needs a
spread *and* its cost:

- a queue of ``IMB_WAITING_MIN`` all window long while every sibling has none (not before
  the window has refreshes enough to know: a start-up burst queues for a scrape or two);
- running ``IMB_RUNNING_X`` x the idle siblings' median (and ``IMB_RUNNING_ABS`` above it)
  with a queue, preemption, or ITL p95 ``IMB_ITL_X`` x theirs (``IMB_ITL_ABS_S`` above);
- KV ``IMB_KV_GAP`` above every idle sibling with a queue or preemption.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_s
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import (
    IMB_ITL_ABS_S,
    IMB_ITL_X,
    IMB_KV_GAP,
    IMB_KV_ROOM,
    IMB_RUNNING_ABS,
    IMB_RUNNING_X,
    IMB_WAITING_MIN,
    MIN_TOKENS,
)
from llmtop.model import EngineRow

__all__ = ["idle_siblings", "imbalance", "overloaded"]


def _median(vals: list[float]) -> float:
    vals = sorted(vals)
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def _name(r: EngineRow) -> str:
    return f"rank {r.rank}" if r.rank is not None else r.target


def _itl_p95(r: EngineRow) -> float | None:
    q = r.itl_s
    if q is None or q.p95 is None or (q.count is not None and q.count < MIN_TOKENS):
        return None
    return q.p95


def idle_siblings(sibs: Sequence[EngineRow]) -> list[EngineRow]:
    """The siblings with room for more load: nothing waiting (known) and KV below
    ``IMB_KV_ROOM`` (or not reported)."""
    return [s for s in sibs if s.waiting is not None and s.waiting == 0
            and (s.kv_cache_usage is None or s.kv_cache_usage < IMB_KV_ROOM)]


def _idle_words(r: EngineRow, sibs: Sequence[EngineRow], idle: list[EngineRow]) -> str:
    """``while its sibling X is idle (0 waiting, N running, KV K)``; of several, the least
    loaded idle one is named."""
    least = min(idle, key=lambda s: (s.running if s.running is not None else 0.0,
                                     s.kv_cache_usage or 0.0))
    load = ", ".join(p for p in (
        "0 waiting",
        f"{least.running:.0f} running" if least.running is not None else "",
        f"KV {fmt_pct(least.kv_cache_usage)}" if least.kv_cache_usage is not None else "")
        if p)
    kin = "rank" if r.rank is not None else "sibling"
    if len(sibs) == 1:
        return f"while its {kin} {_name(least)} is idle ({load})"
    return (f"while {len(idle)} of its {len(sibs)} {kin}s are idle (least loaded: "
            f"{_name(least)}, {load})")


def overloaded(r: EngineRow, sibs: Sequence[EngineRow], waiting: float | None,
               window: str, *, queue_lasted: bool) -> tuple[str, list[Evidence]] | None:
    """Why ``r`` carries far more than its idle ``sibs`` (words, evidence), or None (see the
    module doc). ``waiting``: ``r``'s queue all window long where known, else now;
    ``window``: the label of the rates' window in the evidence; ``queue_lasted``: whether the
    queue is known to have lasted (a queue alone is a finding only then)."""
    idle = idle_siblings(sibs)
    if not idle:
        return None
    sw = [s.waiting for s in sibs if s.waiting is not None]
    sib_wait = max(sw) if sw else None
    queued = waiting is not None and waiting >= 1
    preempting = bool(r.preemptions_per_s)
    kv = r.kv_cache_usage
    idle_kv = [s.kv_cache_usage for s in idle if s.kv_cache_usage is not None]
    ev_room = [Evidence("siblings_max.waiting", sib_wait, "now"),
               Evidence("idle_siblings_max.kv", max(idle_kv) if idle_kv else None, "now",
                        None, IMB_KV_ROOM)]
    mine = ", ".join(p for p in (f"{waiting:.0f} waiting" if queued and waiting else "",
                                 f"KV {fmt_pct(kv)}" if kv is not None else "") if p)
    if queue_lasted and waiting is not None and waiting >= IMB_WAITING_MIN and sib_wait == 0:
        return (f"{mine}, {_idle_words(r, sibs, idle)}",
                [Evidence("waiting", waiting, "now", None, IMB_WAITING_MIN), *ev_room])
    costs: list[str] = []
    ev_cost: list[Evidence] = []
    if queued:
        costs.append(f"{waiting:.0f} waiting")
        ev_cost.append(Evidence("waiting", waiting, "now", None, 1.0))
    if preempting:
        costs.append(f"{r.preemptions_per_s:.2g} preemptions/s")
        ev_cost.append(Evidence("preemptions_per_s", r.preemptions_per_s, window, None, 0.0))
    ir = [s.running for s in idle if s.running is not None]
    if r.running is not None and ir:
        med = _median(ir)
        itl = _itl_p95(r)
        sib_itl = [v for v in (_itl_p95(s) for s in idle) if v is not None]
        slow = bool(itl is not None and sib_itl and itl >= IMB_ITL_X * _median(sib_itl)
                and itl - _median(sib_itl) >= IMB_ITL_ABS_S)
        busier = kv is None or not idle_kv or kv > max(idle_kv)
        if (r.running >= IMB_RUNNING_X * med and r.running - med >= IMB_RUNNING_ABS and busier
                and (costs or slow)):
            ev = [Evidence("running", r.running, "now", None, IMB_RUNNING_X * med),
                  Evidence("idle_siblings_median.running", med, "now"), *ev_cost]
            if slow and itl is not None:
                m = _median(sib_itl)
                costs.append(f"ITL p95 {fmt_s(itl)} vs {fmt_s(m)}")
                ev += [Evidence("itl_p95", itl, window, None, max(IMB_ITL_X * m,
                                                                  m + IMB_ITL_ABS_S)),
                       Evidence("idle_siblings_median.itl_p95", m, window)]
            return (f"{r.running:.0f} running ({', '.join(costs)}), "
                    f"{_idle_words(r, sibs, idle)}", [*ev, *ev_room])
    if kv is not None and idle_kv and kv - max(idle_kv) >= IMB_KV_GAP and costs:
        return (f"KV {fmt_pct(kv)} ({', '.join(costs)}), {_idle_words(r, sibs, idle)}",
                [Evidence("kv", kv, "now", None, max(idle_kv) + IMB_KV_GAP), *ev_cost,
                 *ev_room])
    return None


def imbalance(c: RowCtx) -> list[Finding]:
    """This replica against the other replicas of its model, and its ranks against each other."""
    row = c.row
    waiting = row.waiting
    lasted = c.waiting_min is not None  # else too few refreshes in the window to know
    if lasted and waiting is not None:
        waiting = min(waiting, c.waiting_min)  # a queue seen all window long, not a blip
    got = overloaded(row, c.siblings, waiting, c.window, queue_lasted=lasted)
    if got is not None:
        words, ev = got
        return [c.finding("imbalance", "warn", f"replica {row.target} of {row.model} "
                          f"overloaded: {words}", ev,
                          "the router sends this replica more than it can take while its "
                          "siblings idle (session affinity, round-robin over unequal "
                          "replicas): fix the spread in the router")]
    ranks = [r for r in row.ranks if r.rank is not None]
    for r in ranks:
        # a rank has no history of its own: its queue now, while the engine's lasted
        got = overloaded(r, [s for s in ranks if s is not r], r.waiting, c.window,
                         queue_lasted=lasted and c.waiting_min >= 1)
        if got is not None:
            words, ev = got
            return [c.finding("imbalance", "warn", f"data-parallel rank {r.rank} overloaded: "
                              f"{words}", ev, "the engine's DP load balancing or its router "
                              "favours one rank")]
    return []
