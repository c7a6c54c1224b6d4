"""``routing``: the router is the cause. Three shapes, the first two named on the backend
(its engine row's target, else its URL), the third on the router:

- **overfed**: it keeps sending a backend its share (``ROUTE_FAIR_X`` x an equal share, or
  ``ROUTE_OVER_CAPACITY_X`` x its share of the pool's capacity) while that backend queues
  (``ROUTE_WAITING_MIN`` all window) and a sibling of its pool has room (nothing waiting, KV
  below ``IMB_KV_ROOM``): names the policy, the backend, the shares, each side's queue and
  seats;
- **backend down**: unhealthy or breaker-open in the router's eyes, or not answering llmtop:
  how much of the pool's capacity is gone, and whether the router still sends it requests;
- **overhead**: the router's own added latency is ``ROUTER_OVERHEAD_SHARE`` of the TTFT path
  (and ``ROUTER_OVERHEAD_MIN_S``).
"""

from __future__ import annotations

from llmtop.diagnose.context import fmt_pct, fmt_s
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.rules.imbalance import idle_siblings
from llmtop.diagnose.stack_ctx import StackCtx
from llmtop.diagnose.thresholds import (
    ROUTE_FAIR_X,
    ROUTE_MIN_REQUESTS,
    ROUTE_OVER_CAPACITY_X,
    ROUTE_WAITING_MIN,
    ROUTER_OVERHEAD_MIN_S,
    ROUTER_OVERHEAD_SHARE,
)
from llmtop.model import GOOD_STATES, EngineRow
from llmtop.model.stack import BackendRow, RouterRow

__all__ = ["routing"]


def _seats(r: EngineRow) -> str:
    run = f"{r.running:.0f}" if r.running is not None else "–"
    lim = f" of {r.max_running:.0f} seats" if r.max_running is not None else " running"
    return f"{run}{lim}, {r.waiting or 0:.0f} waiting"


def _pool(router: RouterRow, b: BackendRow) -> list[BackendRow]:
    return [x for x in router.backends if x.role == b.role]


def _overfed(ctx: StackCtx, router: RouterRow) -> list[Finding]:
    if router.requests_per_s is None or router.requests_per_s * ctx.window_s < ROUTE_MIN_REQUESTS:
        return []
    out = []
    for b in router.backends:
        row, pool = ctx.row(b.target), _pool(router, b)
        if row is None or row.state not in GOOD_STATES or b.routed_share is None or len(pool) < 2:
            continue
        waiting = ctx.waiting_all(row)
        fair = ROUTE_FAIR_X / len(pool)
        over_cap = (b.capacity_share is not None
                    and b.routed_share >= ROUTE_OVER_CAPACITY_X * b.capacity_share)
        if waiting is None or waiting < ROUTE_WAITING_MIN or not (b.routed_share >= fair
                                                                   or over_cap):
            continue
        sib_rows = [r for x in pool if x is not b and (r := ctx.row(x.target)) is not None
                    and r.state in GOOD_STATES]
        idle = idle_siblings(sib_rows)
        if not idle:
            continue  # every sibling is busy too: the pool is short, not badly routed
        other = min(idle, key=lambda r: r.running or 0.0)
        ob = next(x for x in pool if x.target == other.target)
        what = "running limits" if b.capacity_basis == "seats" else "KV cache"
        cap = (f" (it has {fmt_pct(b.capacity_share)} of the pool's {what})"
               if b.capacity_share is not None else "")
        summary = (f"{router.engine or 'router'} (policy {router.policy or 'unknown'}) sends "
                   f"{b.target} {fmt_pct(b.routed_share)} of the requests{cap} while it holds "
                   f"{_seats(row)}; {other.target} has room ({_seats(other)}, KV "
                   f"{fmt_pct(other.kv_cache_usage)}) and gets {fmt_pct(ob.routed_share)}")
        ev = [ctx.ev("routed_share", b.routed_share, round(fair, 3)),
              ctx.ev("capacity_share", b.capacity_share),
              ctx.ev("waiting", waiting, ROUTE_WAITING_MIN),
              ctx.ev("sibling_waiting", other.waiting, 0.0, now=True),
              ctx.ev("policy", router.policy or "unknown", now=True)]
        action = (f"route by load, not in turn (a least-load / power_of_two / cache_aware "
                  f"policy), or give {b.target} the seats of its siblings (--max-num-seqs) "
                  "or a weight matching its capacity")
        out.append(ctx.on_backend(b, row, "routing", "warn", summary, ev, action))
    return out


def _down(ctx: StackCtx, router: RouterRow) -> list[Finding]:
    out = []
    for b in router.backends:
        row = ctx.row(b.target)
        router_down = b.healthy is False or b.breaker_open is True
        dead = row is not None and row.state not in GOOD_STATES
        if not (router_down or dead):
            continue
        pool = _pool(router, b)
        gone = b.capacity_share if b.capacity_share is not None else 1 / max(1, len(pool))
        sending = b.requests_per_s is not None and b.requests_per_s > 0
        why = ", ".join(w for w in (
            "unhealthy" if b.healthy is False else "",
            "breaker open" if b.breaker_open else "",
            f"not answering llmtop ({row.state})" if dead and row is not None else "") if w)
        view = ("in the router's eyes" if router_down
                else "to llmtop, yet the router counts it healthy")
        still = (f"the router still sends it {b.requests_per_s:.2f} req/s" if sending
                 else "the router no longer sends it requests")
        summary = (f"backend {b.target or b.url} is down {view} ({why}): the "
                   f"{b.role or ''}{' ' if b.role else ''}pool has lost {fmt_pct(gone)} of its "
                   f"capacity ({len(pool) - 1} of {len(pool)} replicas left); {still}")
        ev = [ctx.ev("healthy", None if b.healthy is None else float(b.healthy), now=True),
              ctx.ev("breaker_open", None if b.breaker_open is None
                     else float(b.breaker_open), now=True),
              ctx.ev("requests_per_s", b.requests_per_s, 0.0),
              ctx.ev("capacity_lost", gone)]
        action = ("restart or replace it; until then the other replicas carry its load"
                  + (" — and the router keeps sending it requests that fail or wait: take it "
                     "out of the router's worker list" if sending else ""))
        out.append(ctx.on_backend(b, row, "routing", "critical" if sending else "warn",
                                  summary, ev, action))
    return out


def _overhead(ctx: StackCtx, router: RouterRow) -> list[Finding]:
    path = {s.name: s.seconds for s in ctx.stack.paths.get(router.target, [])}
    own, total = path.get("router"), sum(path.values())
    if own is None or total <= 0 or own < ROUTER_OVERHEAD_MIN_S \
            or own / total < ROUTER_OVERHEAD_SHARE:
        return []
    summary = (f"the router itself adds {fmt_s(own)} on average, {fmt_pct(own / total)} of "
               "the time to first token (its backends answer faster than it does)")
    ev = [ctx.ev("router_added_s", own, ROUTER_OVERHEAD_MIN_S),
          ctx.ev("router_share_of_ttft", own / total, ROUTER_OVERHEAD_SHARE),
          ctx.ev("retries_per_s", router.retries_per_s)]
    action = ("look at the router: retries, its rate limiter's queue, its tokenizer or "
              "cache-aware tree; give it CPU or run more router replicas")
    return [ctx.on_router(router, "routing", "warn", summary, ev, action)]


def routing(ctx: StackCtx) -> list[Finding]:
    """Findings of every router whose own scrape is good."""
    out: list[Finding] = []
    for router in ctx.stack.routers:
        if router.state not in GOOD_STATES:
            continue
        out += _down(ctx, router) + _overfed(ctx, router) + _overhead(ctx, router)
    return out
