"""``queueing``: admission-bound. Requests wait for a running slot, not for compute."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_s
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.signals import count
from llmtop.diagnose.thresholds import (
    KV_FULL,
    MIN_REQUESTS,
    QUEUE_CRIT_S,
    QUEUE_CRIT_SHARE,
    QUEUE_DEFERRED_SHARE,
    QUEUE_FEW_MIN,
    QUEUE_P95_MIN_S,
    QUEUE_SERVICE_X,
    QUEUE_SHARE,
    QUEUE_WAITING_MIN,
    RUNNING_AT_LIMIT,
)

__all__ = ["queueing"]

WAITING_ONLY_MIN = QUEUE_WAITING_MIN
"""Without queue-time histograms, a queue this long all window long (vLLM Doctor's 5)."""


def _overwhelming(c: RowCtx, n: float, qm: float | None) -> float | None:
    """Fewer than MIN_REQUESTS finished: the queue/service ratio when the evidence is
    overwhelming all the same (see ``QUEUE_FEW_MIN``), else None."""
    w, wmin, svc = c.row.waiting, c.waiting_min, c.sig("inference_mean")
    if n < QUEUE_FEW_MIN or w is None or w < QUEUE_WAITING_MIN:
        return None
    if wmin is not None and wmin < QUEUE_WAITING_MIN:
        return None
    if qm is None or qm < QUEUE_P95_MIN_S or svc is None or svc <= 0:
        return None
    return qm / svc if qm >= QUEUE_SERVICE_X * svc else None


def _action(c: RowCtx, at_limit: bool) -> str:
    row = c.row
    kv = row.kv_cache_usage
    if row.engine == "sglang" and kv is not None and kv < 0.9:
        return ("lower --schedule-conservativeness (e.g. 0.3): token usage below 0.9 with a "
                "queue means the scheduler admits too few, or add a replica")
    flag = "--max-num-seqs" if row.engine == "vllm" else "the running limit"
    if at_limit and kv is not None and kv < KV_FULL:
        return f"raise {flag} (KV has room at {fmt_pct(kv)}) or add a replica"
    if row.max_running is None and kv is not None and kv < KV_FULL and row.running:
        # vLLM does not export --max-num-seqs: running flat with KV room is the likely limit
        return (f"KV has room at {fmt_pct(kv)}: if {row.running:.0f} running is the engine's "
                f"limit (not exported), raise {flag}; otherwise add a replica")
    return "add a replica: the load exceeds this engine's capacity (llmtop probe finds how much)"


DEFERRED_ACTION = ("the queue is deferred requests, not load: check the LoRA budget "
                   "(--max-loras, --max-cpu-loras) and the KV connector's transfers; a "
                   "replica or a higher --max-num-seqs will not drain it")


def _finding(c: RowCtx, severity: str, summary: str, ev: list, at_limit: bool) -> Finding:
    """The finding, told apart where most of the queue is deferred (vLLM), not waiting for
    room: then that is the cause and the action."""
    w, d = c.row.waiting, c.row.waiting_deferred
    if w and d is not None and d >= QUEUE_DEFERRED_SHARE * w:
        summary += (f"; {d:.0f} of the {w:.0f} are deferred (LoRA budget, KV transfer or a "
                    "blocked request), not waiting for capacity")
        ev = [*ev, c.ev("waiting_deferred", None, d, baseline=False)]
        return c.finding("queueing", severity, summary, ev, DEFERRED_ACTION)
    return c.finding("queueing", severity, summary, ev, _action(c, at_limit))


def queueing(c: RowCtx) -> list[Finding]:
    """Waiting > 0 all window long and queue time a large share of TTFT."""
    row = c.row
    w = row.waiting
    if w is None or w < 1 or (c.waiting_min is not None and c.waiting_min < 1):
        return []
    q50, q95, t50 = c.sig("queue_p50"), c.sig("queue_p95"), c.sig("ttft_p50")
    run, lim = row.running, row.max_running
    at_limit = run is not None and lim is not None and lim > 0 and run >= RUNNING_AT_LIMIT * lim
    limit = f"; running is pinned at {run:.0f} = its limit" if at_limit and run is not None else ""
    kv = f" while KV is {fmt_pct(row.kv_cache_usage)}" if row.kv_cache_usage is not None else ""
    ev = [c.ev("waiting", 1.0), c.ev("waiting_min", 1.0, c.waiting_min, baseline=False)]
    qm, tm = c.sig("queue_mean"), c.sig("ttft_mean")
    # the tail: p95, else the mean (Triton's queue is a mean-only µs counter pair)
    hi, hi_name = (q95, "queue_p95") if q95 is not None else (qm, "queue_mean")
    if row.queue_s is not None and hi is not None:
        n = count(row, "queue_s")
        if hi < QUEUE_P95_MIN_S:
            return []
        ratio = _overwhelming(c, n, qm) if n < MIN_REQUESTS else None
        if n < MIN_REQUESTS and ratio is None:
            return []
        # the share from the means (exact: _sum/_count) where both exist; the p50s sit in
        # coarse buckets (vLLM's lowest queue bucket is 0.3 s, so a p50 "below" reads 0.3)
        if qm is not None and tm:
            share, share_of = qm / tm, "mean"
        else:
            share, share_of = (q50 / t50 if q50 is not None and t50 else None), "p50"
        if share is not None and share < QUEUE_SHARE:
            return []
        critical = hi >= QUEUE_CRIT_S and (share is None or share >= QUEUE_CRIT_SHARE)
        usual = c.usual(hi_name)
        ev += [c.ev(hi_name, QUEUE_P95_MIN_S), c.ev(f"queue_{share_of}"),
               c.ev(f"ttft_{share_of}"),
               c.ev("queue_share_of_ttft", QUEUE_SHARE, share, baseline=False)]
        if ratio is not None:
            ev += [c.ev("requests", MIN_REQUESTS, n, baseline=False),
                   c.ev("inference_mean"),
                   c.ev("queue_over_service", QUEUE_SERVICE_X, ratio, baseline=False)]
        tt = c.sig("ttft_p95")
        head = f"TTFT p95 {fmt_s(tt)}: " if tt is not None else ""
        share_txt = (f" is {fmt_pct(min(share, 1.0))} of TTFT's {share_of}"
                     if share is not None else "")
        mid = qm if share_of == "mean" else q50
        times = [f"{share_of} {fmt_s(mid)}"] if mid is not None else []
        if q95 is not None:
            times.append(f"p95 {fmt_s(q95)}")
        summary = (f"{head}{w:.0f} requests wait and queue time ({', '.join(times)})"
                   f"{share_txt}{limit}{kv}")
        if ratio is not None:
            seen = (f"at least {c.waiting_min:.0f} waiting all window"
                    if c.waiting_min is not None else f"{w:.0f} waiting now")
            summary += (f"; only {n:.0f} finished in {c.window_s:.3g} s, but they waited "
                        f"\u00d7{ratio:.1f} as long as they ran, {seen}")
        if usual is not None and hi < 2 * usual:
            summary += f"; as usual for this engine ({fmt_s(usual)})"
            return [_finding(c, "info", summary, ev, at_limit)]
        return [_finding(c, "critical" if critical else "warn", summary, ev, at_limit)]
    # no queue-time histogram: only a long queue seen all window long
    if c.waiting_min is None or c.waiting_min < WAITING_ONLY_MIN:
        return []
    summary = f"{w:.0f} requests wait (at least {c.waiting_min:.0f} all window){limit}{kv}"
    return [_finding(c, "warn", summary, ev, at_limit)]
