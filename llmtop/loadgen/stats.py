"""Pure aggregation: request results of one measurement window -> one step dict.

Definitions (``docs/probe.md``; as in ``LOADGEN.md``):

- TTFT: send -> first event with non-empty content.
- ITL (``itl_s``): per-chunk gaps between consecutive content events, pooled over requests.
- per-request ITL (``itl_request_s``): (last - first) / (content events - 1).
- TPOT: (E2E - TTFT) / (output_tokens - 1), output tokens from ``usage`` when reported.
- E2E: send -> last content event.
- Goodput: successful requests meeting every SLO that is set, per second of the window.
- With ``--rate``: send lateness = actual send - intended send (the schedule's time);
  ``ttft_from_schedule_s`` / ``e2e_from_schedule_s`` are measured from the intended time
  (what a user arriving on schedule saw: no coordinated omission).
- Client-bound: ``step_is_client_bound(step)``, the one definition (probe, bake-off, tuner).

No I/O, no clock: callers pass the window length and the client-side measurements.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = [
    "CLIENT_CPU_BOUND",
    "LATENESS_BOUND_S",
    "LOOP_LAG_BOUND_MS",
    "SHORTFALL_BOUND",
    "STALL_BOUND_S",
    "STALL_SHARE_BOUND",
    "STALL_TOTAL_MIN_S",
    "error_rate",
    "p95_lost",
    "percentiles",
    "stall_summary",
    "step_is_client_bound",
    "summarize_step",
]

CLIENT_CPU_BOUND = 0.85
"""A step whose client used more than this many cores (of its one event loop) is client-bound."""
LOOP_LAG_BOUND_MS = 10.0
"""... or whose mean event-loop lag exceeded this."""
SHORTFALL_BOUND = 0.95
"""... or whose achieved concurrency (rate) was below this share of the target."""
STALL_BOUND_S = 0.1
"""A pause of the generator's event loop longer than this is recorded as a stall."""
STALL_SHARE_BOUND = 0.05
"""... and a step whose stalls add up to more than this share of its window (and to more
than ``STALL_TOTAL_MIN_S``) is client-bound."""
STALL_TOTAL_MIN_S = 0.5
"""(A busy shared box pauses any process for ~0.1 s now and then: not yet a lie.)"""
LATENESS_BOUND_S = 0.25
"""... as is a ``--rate`` step whose generator sent requests later than this at p99 (its own
lateness: the time a due request waited for the loop, not for the concurrency cap)."""
MAX_ITL_SAMPLES = 500_000
MAX_STALL_EVENTS = 20


class _Res(Protocol):
    t_send: float
    t_first: float | None
    t_last: float | None
    t_end: float
    n_content: int
    output_tokens: int | None
    prompt_tokens: int | None
    error: str | None
    gaps: array
    t_intended: float | None


def percentiles(values: Sequence[float] | Iterable[float]) -> dict[str, float | None]:
    """``{"p50","p90","p95","p99","mean"}`` with linear interpolation; all None when empty."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return {"p50": None, "p90": None, "p95": None, "p99": None, "mean": None}

    def q(p: float) -> float:
        pos = p * (n - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, n - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return {"p50": q(0.50), "p90": q(0.90), "p95": q(0.95), "p99": q(0.99),
            "mean": math.fsum(xs) / n}


def p95_lost(missed: int | None, planned: int | None) -> bool:
    """Whether ``missed`` requests of a list of ``planned`` already past an SLO make its p95
    miss it whatever the rest do, however little past it they are: ``percentiles``
    interpolates the p95 at rank 0.95 (n-1), between two of the ``n - floor(0.95 (n-1))``
    largest values, so that many past the SLO put it there. (Fewer far past it may too:
    not known from counts.)"""
    if not missed or not planned:
        return False
    return missed >= planned - math.floor(0.95 * (planned - 1))


def _spread(values: Sequence[float]) -> dict[str, float | None] | None:
    """``{"p50","p99","max"}``; None when there are no values."""
    if not values:
        return None
    q = percentiles(values)
    return {"p50": q["p50"], "p99": q["p99"], "max": max(values)}


def stall_summary(stalls: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """``stalls`` as ``(when_s, how_long_s)`` -> ``{"count","total_s","longest_s","events"}``
    (the first ``MAX_STALL_EVENTS`` events as ``[when_s, how_long_s]``)."""
    return {"count": len(stalls), "total_s": math.fsum(d for _, d in stalls),
            "longest_s": max((d for _, d in stalls), default=0.0),
            "events": [[round(t, 3), round(d, 3)] for t, d in stalls[:MAX_STALL_EVENTS]]}


def step_is_client_bound(step: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether a step's numbers are the load generator's rather than the server's, with the
    reasons in words. Reads only the step's own fields (any may be missing)."""
    reasons: list[str] = []
    cpu, lag = step.get("client_cpu"), step.get("loop_lag_ms")
    if cpu is not None and cpu > CLIENT_CPU_BOUND:
        reasons.append(f"client CPU {cpu:.2f} cores")
    if lag is not None and lag > LOOP_LAG_BOUND_MS:
        reasons.append(f"event-loop lag {lag:.0f} ms")
    stalls = step.get("stalls") or {}
    dur = step.get("duration_s") or 0.0
    if stalls.get("count") and stalls["total_s"] > max(STALL_SHARE_BOUND * dur,
                                                       STALL_TOTAL_MIN_S):
        n = stalls["count"]
        wait = step.get("client_cpu_wait_s")
        reasons.append(f"generator paused {n} time{'s' if n != 1 else ''}, "
                       f"{stalls['total_s']:.1f} s in all"
                       + (f" ({wait:.1f} s of the window waiting for a CPU)"
                          if wait is not None and wait >= 0.05 else ""))
    late = (step.get("generator_lateness_s") or {}).get("p99")
    if late is not None and late > LATENESS_BOUND_S:
        reasons.append(f"requests sent late: p99 {late * 1000:.0f} ms behind the schedule")
    n_ok, n_err = step.get("requests") or 0, step.get("errors_total") or 0
    quiet = error_rate(n_ok, n_err) < 0.05 and not (step.get("retry_after") or {}).get("count")
    conc, ach = step.get("concurrency"), step.get("achieved_concurrency")
    fixed = step.get("requests_planned") is not None  # a fixed list fills and drains by design
    if conc and ach is not None and quiet and not fixed and ach < SHORTFALL_BOUND * conc:
        reasons.append(f"achieved concurrency {ach:.1f} < 95% of {conc}")
    # the rate is judged against what the schedule made due in the window (a Poisson
    # schedule's own count varies around the nominal rate), and not when the concurrency
    # cap held requests: the server's seats, not the generator, set the rate then (how late
    # each went out after its seat freed is the lateness above)
    rate, ach_r = step.get("rate"), step.get("achieved_rate")
    due = step.get("due_rate")
    due = rate if due is None else due  # 0 due (a Poisson window cut short): none fell short
    if rate and ach_r is not None and quiet and not step.get("cap_waits") \
            and ach_r < SHORTFALL_BOUND * due:
        reasons.append(f"achieved rate {ach_r:.2f}/s < 95% of {due:.3g}/s due")
    return bool(reasons), reasons


def error_rate(requests: int, errors: int) -> float:
    """errors / (requests + errors); 0 when nothing finished."""
    total = requests + errors
    return errors / total if total else 0.0


def _meets(ttft: float | None, itl: float | None, tpot: float | None,
           slo: dict[str, float | None]) -> bool:
    for val, key in ((ttft, "ttft"), (itl, "itl"), (tpot, "tpot")):
        lim = slo.get(key)
        if lim is not None and (val is None or val > lim):
            return False
    return True


def summarize_step(
    results: Iterable[_Res],
    *,
    duration_s: float,
    slo: dict[str, float | None] | None = None,
    concurrency: int | None = None,
    rate: float | None = None,
    achieved_concurrency: float | None = None,
    achieved_rate: float | None = None,
    client_cpu: float | None = None,
    loop_lag_ms: float | None = None,
    loop_lag_max_ms: float | None = None,
    retry_after_count: int = 0,
    retry_after_wait_s: float = 0.0,
    dispatch_lag_ms: float | None = None,
    index: int = 0,
    stalls: Sequence[tuple[float, float]] = (),
    generator_lateness: Sequence[float] | None = None,
    cpu_wait_s: float | None = None,
    due_rate: float | None = None,
    cap_waits: int | None = None,
) -> dict[str, Any]:
    """One step of the report from the requests that completed inside its window.

    ``stalls``: the generator's loop pauses in the window, ``(when_s, how_long_s)``;
    ``generator_lateness``: with ``--rate``, how late each due request was taken up;
    ``cpu_wait_s``: how long the generator's loop was ready to run but got no CPU (the OS's
    share of any stall; Linux); ``due_rate``: requests the schedule made due per second of
    the window (a Poisson schedule's own count, not the nominal rate); ``cap_waits``: due
    requests that waited for a free seat under the concurrency cap."""
    slo = slo or {}
    ttfts: list[float] = []
    e2es: list[float] = []
    tpots: list[float] = []
    itl_req: list[float] = []
    gaps = array("d")
    late: list[float] = []
    ttft_sched: list[float] = []
    e2e_sched: list[float] = []
    errors: dict[str, int] = {}
    n_ok = out_tokens = prompt_tokens = good = 0
    for r in results:
        t_int = r.t_intended
        if t_int is not None:
            late.append(max(0.0, r.t_send - t_int))
        if r.error is not None:
            errors[r.error] = errors.get(r.error, 0) + 1
            continue
        n_ok += 1
        toks = r.output_tokens if r.output_tokens is not None else r.n_content
        out_tokens += toks
        if r.prompt_tokens:
            prompt_tokens += r.prompt_tokens
        ttft = tpot = itl_r = None
        if r.t_first is not None:
            ttft = r.t_first - r.t_send
            ttfts.append(ttft)
            e2e = (r.t_last if r.t_last is not None else r.t_end) - r.t_send
            e2es.append(e2e)
            if t_int is not None:
                ttft_sched.append(r.t_first - t_int)
                e2e_sched.append(e2e + r.t_send - t_int)
            if toks > 1:
                tpot = (e2e - ttft) / (toks - 1)
                tpots.append(tpot)
            if r.n_content > 1 and r.t_last is not None:
                itl_r = (r.t_last - r.t_first) / (r.n_content - 1)
                itl_req.append(itl_r)
            gaps.extend(r.gaps)
        if _meets(ttft, itl_r, tpot, slo):
            good += 1
    if len(gaps) > MAX_ITL_SAMPLES:  # keep sorting bounded; an even stride keeps the shape
        stride = math.ceil(len(gaps) / MAX_ITL_SAMPLES)
        gaps = gaps[::stride]
    n_err = sum(errors.values())
    dur = max(duration_s, 1e-9)
    step = {
        "index": index,
        "concurrency": concurrency,
        "rate": rate,
        "achieved_concurrency": achieved_concurrency,
        "achieved_rate": achieved_rate,
        "requests": n_ok,
        "errors_total": n_err,
        "error_rate": error_rate(n_ok, n_err),
        "output_tokens": out_tokens,
        "prompt_tokens": prompt_tokens,
        "duration_s": duration_s,
        "requests_per_s": n_ok / dur,
        "output_tokens_per_s": out_tokens / dur,
        "goodput_per_s": good / dur,
        "goodput_fraction": good / n_ok if n_ok else None,
        "ttft_s": percentiles(ttfts),
        "itl_s": percentiles(gaps),
        "itl_request_s": percentiles(itl_req),
        "tpot_s": percentiles(tpots),
        "e2e_s": percentiles(e2es),
        "errors": errors,
        "retry_after": {"count": retry_after_count, "wait_s": retry_after_wait_s},
        "client_bound": False,
        "client_bound_reasons": [],
        "client_cpu": client_cpu,
        "loop_lag_ms": loop_lag_ms,
        "loop_lag_max_ms": loop_lag_max_ms,
        "dispatch_lag_ms": dispatch_lag_ms,
        "stalls": stall_summary(stalls),
        "client_cpu_wait_s": cpu_wait_s,
    }
    if rate:
        step["due_rate"] = due_rate
        step["cap_waits"] = cap_waits
        step["send_lateness_s"] = _spread(late)
        step["generator_lateness_s"] = _spread(generator_lateness or [])
        step["ttft_from_schedule_s"] = percentiles(ttft_sched)
        step["e2e_from_schedule_s"] = percentiles(e2e_sched)
    step["client_bound"], step["client_bound_reasons"] = step_is_client_bound(step)
    return step
