"""``kv_transfer``: the KV between the prefill and decode pools is the cause.

- failing: failed transfers or notifications, expired KV (vLLM NIXL), bootstrap or transfer
  failures (SGLang): ``KV_FAIL_MIN`` in the window is a finding, ``KV_FAIL_CRIT_PER_S``
  critical (named on the engine that counts them);
- slow: the transfer / decode-pending stage of a router's TTFT path (router decode-pending,
  else the engines' transfer time) is ``KV_XFER_SHARE`` of the path and ``KV_XFER_MIN_S`` on
  average (named on the router); an engine outside any router: its own transfer time against
  its own TTFT.
"""

from __future__ import annotations

from llmtop.diagnose.context import fmt_pct, fmt_s
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.stack_ctx import StackCtx
from llmtop.diagnose.thresholds import (
    KV_FAIL_CRIT_PER_S,
    KV_FAIL_MIN,
    KV_XFER_MIN_S,
    KV_XFER_SHARE,
)
from llmtop.model import GOOD_STATES, EngineRow, KvTransfer

__all__ = ["kv_transfer"]


def _failing(ctx: StackCtx, row: EngineRow) -> list[Finding]:
    kt = row.kv_transfer or KvTransfer()
    fails, expired = kt.failures_per_s, kt.expired_per_s
    n_f = (fails or 0.0) * ctx.window_s
    n_e = (expired or 0.0) * ctx.window_s
    if n_f < KV_FAIL_MIN and n_e < KV_FAIL_MIN:
        return []
    rate = (fails or 0.0) + (expired or 0.0)
    what = ", ".join(w for w in (f"{n_f:.0f} failed transfers" if n_f >= KV_FAIL_MIN else "",
                                 f"{n_e:.0f} requests whose KV expired"
                                 if n_e >= KV_FAIL_MIN else "") if w)
    summary = (f"KV transfers are failing: {what} in the last {ctx.window} "
               f"({rate:.2f}/s); those requests are recomputed or lost")
    ev = [ctx.ev("kv_failures_per_s", fails, KV_FAIL_MIN / ctx.window_s),
          ctx.ev("kv_expired_per_s", expired, KV_FAIL_MIN / ctx.window_s)]
    action = ("check the transfer fabric between the prefill and decode pods (NIXL/UCX or "
              "Mooncake side channel, network, handshake versions); expired KV means the "
              "decode side took too long to pull it (raise its timeout, or add decode "
              "capacity)")
    sev = "critical" if rate >= KV_FAIL_CRIT_PER_S else "warn"
    return [Finding("kv_transfer", sev, row.target, row.model, summary, tuple(ev), action)]


def _slow_path(ctx: StackCtx) -> list[Finding]:
    out = []
    for router in ctx.stack.routers:
        stages = ctx.stack.paths.get(router.target, [])
        path = {s.name: s for s in stages}
        total = sum(s.seconds for s in stages)
        st = path.get("transfer")
        if st is None or total <= 0 or router.state not in GOOD_STATES:
            continue
        share = st.seconds / total
        if st.seconds < KV_XFER_MIN_S or share < KV_XFER_SHARE:
            continue
        split = " → ".join(f"{s.name.replace('_', ' ')} {fmt_s(s.seconds)}" for s in stages)
        summary = (f"the KV transfer takes {fmt_s(st.seconds)} on average ({st.source}), "
                   f"{fmt_pct(share)} of the time to first token ({split})")
        ev = [ctx.ev("transfer_s", st.seconds, KV_XFER_MIN_S),
              ctx.ev("transfer_share_of_ttft", share, KV_XFER_SHARE)]
        action = ("look at the transfer: bandwidth between the pools (NIXL/UCX backend, RDMA "
                  "vs TCP), the decode side's pull queue and its free KV blocks")
        out.append(ctx.on_router(router, "kv_transfer", "warn", summary, ev, action))
    return out


def _slow_alone(ctx: StackCtx, row: EngineRow) -> list[Finding]:
    q = row.kv_transfer.time_s if row.kv_transfer is not None else None
    ttft = row.ttft_s
    if q is None or q.mean is None or not q.count or ttft is None \
            or ttft.mean is None or not ttft.count or ttft.mean <= 0:
        return []
    share = q.mean / ttft.mean
    if q.mean < KV_XFER_MIN_S or share < KV_XFER_SHARE:
        return []
    summary = (f"its KV transfers take {fmt_s(q.mean)} on average, {fmt_pct(share)} of its "
               f"time to first token ({fmt_s(ttft.mean)})")
    ev = [ctx.ev("transfer_s", q.mean, KV_XFER_MIN_S),
          ctx.ev("transfer_share_of_ttft", share, KV_XFER_SHARE)]
    action = "look at the transfer fabric and the prefill side that sends the KV"
    return [Finding("kv_transfer", "warn", row.target, row.model, summary, tuple(ev), action)]


def kv_transfer(ctx: StackCtx) -> list[Finding]:
    """Failing transfers per engine, slow ones per router (or per engine without one)."""
    out: list[Finding] = []
    for row in ctx.rows.values():
        if row.state in GOOD_STATES and row.kv_transfer is not None:
            out += _failing(ctx, row)
            if row.router is None:
                out += _slow_alone(ctx, row)
    return out + _slow_path(ctx)
