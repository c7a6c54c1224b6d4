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
    QUEUE_PINNED_MIN,
    QUEUE_SERVICE_X,
    QUEUE_SHARE,
    QUEUE_WAITING_MIN,
    RUNNING_AT_LIMIT,
)

__all__ = ["queueing"]

WAITING_ONLY_MIN = QUEUE_WAITING_MIN
"""Without queue-time histograms, a queue this long now (vLLM Doctor's 5) that never drained
in the window (``waiting_min`` >= 1). Not "this long all window": a real llama-server
(``--parallel 1``, 10 clients) held 9 deferred with one-sample dips to 2-4 three times a
minute, and a 30 s window's smallest value then lost the finding for 30 s after each dip."""


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


def _sglang_lag(c: RowCtx, run: float | None, lim: float | None) -> bool:
    """SGLang sets ``num_running_reqs`` at each prefill batch from the running batch before
    the admitted one joins it (and every 40th decode step): with a queue all window long,
    one under its limit is the request it just admitted."""
    wmin = c.waiting_min
    return (c.row.engine == "sglang" and run is not None and lim is not None and lim > 0
            and run >= lim - 1 and wmin is not None and wmin >= QUEUE_WAITING_MIN)


def _pinned(c: RowCtx, n: float, qm: float | None, at_limit: bool) -> bool:
    """Fewer than MIN_REQUESTS admitted and no service-time histogram (SGLang): the gauges
    are the evidence (see ``QUEUE_PINNED_MIN``): running at its exported limit, a queue of
    QUEUE_WAITING_MIN all window long, and those admitted waited QUEUE_P95_MIN_S or more."""
    w, wmin = c.row.waiting, c.waiting_min
    if not at_limit or c.sig("inference_mean") is not None or n < QUEUE_PINNED_MIN:
        return False
    if w is None or w < QUEUE_WAITING_MIN or wmin is None or wmin < QUEUE_WAITING_MIN:
        return False
    return qm is not None and qm >= QUEUE_P95_MIN_S


_LIMIT_FLAG = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests",
               "llamacpp": "--parallel (slots; each gets --ctx-size / --parallel tokens, so "
                           "raise --ctx-size with it)"}
"""The flag that sets each engine's running limit."""


def _action(c: RowCtx, at_limit: bool) -> str:
    row = c.row
    kv = row.kv_cache_usage
    if row.engine == "sglang" and kv is not None and kv < 0.9 and not at_limit:
        return ("lower --schedule-conservativeness (e.g. 0.3): token usage below 0.9 with a "
                "queue means the scheduler admits too few, or add a replica")
    if row.engine == "triton" and row.max_running is None:  # a core model, not TRT-LLM's
        return ("give the model more instances (instance_group count) or larger dynamic "
                "batches (max_batch_size) if its compute has room, else add a replica")
    flag = _LIMIT_FLAG.get(row.engine, "the running limit")
    if at_limit and kv is not None and kv < KV_FULL:
        return f"raise {flag} (KV has room at {fmt_pct(kv)}) or add a replica"
    if at_limit and kv is None:
        return f"raise {flag} if memory allows, or add a replica"
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


def _share(c: RowCtx, qm: float | None, q50: float | None
           ) -> tuple[float | None, str, str, float | None]:
    """Queue time as a share of TTFT: (share, ``mean``/``p50``, ``ttft``/``e2e``, the time it
    is a share of). From the means (exact: _sum/_count) where both exist; the p50s sit in
    coarse buckets (vLLM's lowest queue bucket is 0.3 s, so a p50 "below" reads 0.3). Without
    TTFT (Triton's non-streaming models), of the whole request's mean time, which holds the
    queue."""
    tm, t50 = c.sig("ttft_mean"), c.sig("ttft_p50")
    if qm is not None and tm:
        return qm / tm, "mean", "ttft", tm
    if q50 is not None and t50:
        return q50 / t50, "p50", "ttft", t50
    e2e = c.row.e2e_s
    em = e2e.mean if e2e is not None and e2e.count > 0 else None
    if qm is not None and em:
        return qm / em, "mean", "e2e", em
    return None, "mean" if qm is not None else "p50", "ttft", None


def queueing(c: RowCtx) -> list[Finding]:
    """Waiting > 0 all window long and queue time a large share of TTFT; or, with the queue
    drained for moments (bursts), the queue-time histograms alone: enough requests finished
    in the window and their queue time dominates TTFT."""
    row = c.row
    w = row.waiting
    if w is None:
        return []
    bursts = w < 1 or (c.waiting_min is not None and c.waiting_min < 1)
    q50, q95 = c.sig("queue_p50"), c.sig("queue_p95")
    run, lim = row.running, row.max_running
    at_limit = run is not None and lim is not None and lim > 0 and run >= RUNNING_AT_LIMIT * lim
    limit = f"; running is pinned at {run:.0f} = its limit" if at_limit and run is not None else ""
    if not at_limit and _sglang_lag(c, run, lim):
        at_limit = True
        limit = (f"; running is at its limit of {lim:.0f} ({run:.0f} by the gauge, which "
                 "leaves out the request just admitted)")
    kv = f" while KV is {fmt_pct(row.kv_cache_usage)}" if row.kv_cache_usage is not None else ""
    ev = [c.ev("waiting", 1.0), c.ev("waiting_min", 1.0, c.waiting_min, baseline=False)]
    qm = c.sig("queue_mean")
    # the tail: p95, else the mean (Triton's queue is a mean-only µs counter pair)
    hi, hi_name = (q95, "queue_p95") if q95 is not None else (qm, "queue_mean")
    if row.queue_s is not None and hi is not None:
        n = count(row, "queue_s")
        if hi < QUEUE_P95_MIN_S:
            return []
        ratio = _overwhelming(c, n, qm) if n < MIN_REQUESTS and not bursts else None
        pinned = (n < MIN_REQUESTS and ratio is None and not bursts
                  and _pinned(c, n, qm, at_limit))
        if n < MIN_REQUESTS and ratio is None and not pinned:
            return []
        share, share_of, of, whole_s = _share(c, qm, q50)
        if pinned and share is None:
            return []
        if share is None and bursts:
            return []  # a drained queue is named only by its share of the time
        if share is not None and share < QUEUE_SHARE:
            return []
        critical = hi >= QUEUE_CRIT_S and (share is None or share >= QUEUE_CRIT_SHARE)
        usual = c.usual(hi_name)
        whole = (c.ev("e2e_mean", None, whole_s, baseline=False) if of == "e2e"
                 else c.ev(f"ttft_{share_of}"))
        ev += [c.ev(hi_name, QUEUE_P95_MIN_S), c.ev(f"queue_{share_of}"), whole,
               c.ev(f"queue_share_of_{of}", QUEUE_SHARE, share, baseline=False)]
        if bursts:
            ev.append(c.ev("requests", MIN_REQUESTS, n, baseline=False))
        if ratio is not None:
            ev += [c.ev("requests", MIN_REQUESTS, n, baseline=False),
                   c.ev("inference_mean"),
                   c.ev("queue_over_service", QUEUE_SERVICE_X, ratio, baseline=False)]
        if pinned:
            ev += [c.ev("requests", MIN_REQUESTS, n, baseline=False),
                   c.ev("running", lim, baseline=False)]
        tt = c.sig("ttft_p95")
        head = f"TTFT p95 {fmt_s(tt)}: " if tt is not None else ""
        whole_txt = f"TTFT's {share_of}" if of == "ttft" else "the request time's mean"
        share_txt = (f" is {fmt_pct(min(share, 1.0))} of {whole_txt}"
                     if share is not None else "")
        mid = qm if share_of == "mean" else q50
        times = [f"{share_of} {fmt_s(mid)}"] if mid is not None else []
        if q95 is not None:
            times.append(f"p95 {fmt_s(q95)}")
        queue_txt = f"queue time ({', '.join(times)}){share_txt}"
        if bursts:  # the gauge touched 0: a queue between bursts, or one that is building
            where = ("it drained to 0 waiting now" if w < 1 else
                     f"it drained to 0 waiting for moments ({w:.0f} now), or is building up")
            summary = (f"{head}the queue comes in bursts: {where}, yet over the {n:.0f} "
                       f"requests that finished {queue_txt}{limit}{kv}")
        else:
            summary = f"{head}{w:.0f} requests wait and {queue_txt}{limit}{kv}"
        if ratio is not None:
            seen = (f"at least {c.waiting_min:.0f} waiting all window"
                    if c.waiting_min is not None else f"{w:.0f} waiting now")
            summary += (f"; only {n:.0f} finished in {c.window_s:.3g} s, but they waited "
                        f"\u00d7{ratio:.1f} as long as they ran, {seen}")
        if pinned:
            summary += (f"; only {n:.0f} got a slot in {c.window_s:.3g} s, but at least "
                        f"{c.waiting_min:.0f} waited all window")
        if usual is not None and hi < 2 * usual:
            summary += f"; as usual for this engine ({fmt_s(usual)})"
            return [_finding(c, "info", summary, ev, at_limit)]
        return [_finding(c, "critical" if critical else "warn", summary, ev, at_limit)]
    # no queue-time histogram: a long queue now that never drained in the window
    if w < WAITING_ONLY_MIN or c.waiting_min is None or c.waiting_min < 1:
        return []
    why = " (deferred: no free slot)" if row.engine == "llamacpp" else ""
    summary = (f"{w:.0f} requests wait{why} (never fewer than {c.waiting_min:.0f} in the "
               f"window){limit}{kv}")
    return [_finding(c, "warn", summary, ev, at_limit)]
