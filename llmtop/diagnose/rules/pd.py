"""``pd_balance``: the prefill pool is saturated while the decode pool has room, or the
reverse (llm-d's runbook: "prefill/decode imbalance", "prefill queue saturation"). Named on
the router (the pools' owner), else on the saturated pool's first engine.

Saturated: ``PD_WAITING_MIN`` waiting all window long over the pool, or (decode) KV at
``KV_FULL``. Room: fewer than ``PD_WAITING_MIN`` waiting all window long and KV below
``PD_ROOM_KV``. The ratio that would balance
them: each pool's replicas x its load (running + waiting over its running limit; without a
limit, running + waiting over running for prefill and KV usage for decode).
"""

from __future__ import annotations

from llmtop.diagnose.context import fmt_pct, fmt_s
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.stack_ctx import StackCtx
from llmtop.diagnose.thresholds import KV_FULL, PD_ROOM_KV, PD_WAITING_MIN
from llmtop.model import GOOD_STATES, EngineRow
from llmtop.topology.pools import Pool

__all__ = ["pd_balance"]


def _rows(ctx: StackCtx, pool: Pool) -> list[EngineRow]:
    return [r for t in pool.targets if (r := ctx.row(t)) is not None and r.state in GOOD_STATES]


def _waiting_all(ctx: StackCtx, rows: list[EngineRow]) -> float | None:
    vals = [w for r in rows if (w := ctx.waiting_all(r)) is not None]
    return sum(vals) if vals else None


def _load(pool: Pool, role: str) -> float | None:
    held = (pool.running or 0.0) + (pool.waiting or 0.0)
    if pool.max_running:
        return held / pool.max_running
    if role == "decode" and pool.kv_usage is not None:
        return pool.kv_usage
    return held / pool.running if pool.running else None


def _room(pool: Pool, waiting_all: float | None) -> bool:
    """Room: not saturated itself (fewer than ``PD_WAITING_MIN`` waiting all window long: a
    P/D handoff waits a moment on the decode side, the demo's decode pool showed 1-2 per
    replica beside 27 in prefill) and KV below ``PD_ROOM_KV``."""
    w = waiting_all if waiting_all is not None else pool.waiting
    return (w or 0.0) < PD_WAITING_MIN and (pool.kv_usage is None
                                           or pool.kv_usage < PD_ROOM_KV)


def _one(ctx: StackCtx, router: str | None, pre: Pool, dec: Pool) -> list[Finding]:
    pr, dr = _rows(ctx, pre), _rows(ctx, dec)
    if not pr or not dr:
        return []
    wp, wd = _waiting_all(ctx, pr), _waiting_all(ctx, dr)
    p_sat = wp is not None and wp >= PD_WAITING_MIN
    d_sat = (wd is not None and wd >= PD_WAITING_MIN) or (
        dec.kv_usage is not None and dec.kv_usage >= KV_FULL)
    if p_sat and _room(dec, wd):
        busy, idle, bname, iname = pre, dec, "prefill", "decode"
    elif d_sat and _room(pre, wp):
        busy, idle, bname, iname = dec, pre, "decode", "prefill"
    else:
        return []
    lp, ld = _load(pre, "prefill"), _load(dec, "decode")
    ratio = (len(pr) * lp) / (len(dr) * ld) if lp is not None and ld else None
    now = f"{len(pr)}:{len(dr)}"
    balance = (f"; the load asks for about {ratio:.1f}:1 prefill:decode (now {now})"
               if ratio is not None else f" (prefill:decode replicas now {now})")
    detail = (f"{busy.waiting or 0:.0f} waiting, queue {fmt_s(busy.queue_mean_s)}, prefill "
              f"{fmt_s(busy.prefill_mean_s)}" if bname == "prefill" else
              f"{busy.waiting or 0:.0f} waiting, KV {fmt_pct(busy.kv_usage)}, ITL p95 "
              f"{fmt_s(busy.itl_p95_s)}")
    summary = (f"the {bname} pool is saturated ({detail}) while the {iname} pool has room "
               f"({idle.running or 0:.0f} running, KV {fmt_pct(idle.kv_usage)}){balance}")
    ev = [ctx.ev(f"{bname}_waiting", wp if bname == "prefill" else wd, PD_WAITING_MIN),
          ctx.ev(f"{iname}_waiting", idle.waiting, 0.0, now=True),
          ctx.ev(f"{iname}_kv", idle.kv_usage, PD_ROOM_KV, now=True),
          ctx.ev("prefill_to_decode_needed", ratio),
          ctx.ev("prefill_to_decode_now", now, now=True)]
    action = (f"move replicas from the {iname} pool to the {bname} pool (or add {bname} "
              "replicas); with a fixed fleet, rebalance towards the ratio above")
    target = router or pre.targets[0]
    return [Finding("pd_balance", "warn", target, None, summary, tuple(ev), action)]


def pd_balance(ctx: StackCtx) -> list[Finding]:
    """One finding per (router) pair of prefill and decode pools out of balance."""
    by_router: dict[str | None, dict[str, Pool]] = {}
    for p in ctx.stack.pools:
        by_router.setdefault(p.router, {})[p.role] = p
    out: list[Finding] = []
    for router, pools in by_router.items():
        if "prefill" in pools and "decode" in pools:
            out += _one(ctx, router, pools["prefill"], pools["decode"])
    return out
