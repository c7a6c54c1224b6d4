"""Pure aggregation: request results of one measurement window -> one step dict.

Definitions (``docs/probe.md``; as in ``LOADGEN.md``):

- TTFT: send -> first event with non-empty content.
- ITL (``itl_s``): per-chunk gaps between consecutive content events, pooled over requests.
- per-request ITL (``itl_request_s``): (last - first) / (content events - 1).
- TPOT: (E2E - TTFT) / (output_tokens - 1), output tokens from ``usage`` when reported.
- E2E: send -> last content event.
- Goodput: successful requests meeting every SLO that is set, per second of the window.

No I/O, no clock: callers pass the window length and the client-side measurements.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = [
    "CLIENT_CPU_BOUND",
    "LOOP_LAG_BOUND_MS",
    "SHORTFALL_BOUND",
    "error_rate",
    "percentiles",
    "summarize_step",
]

CLIENT_CPU_BOUND = 0.85
"""A step whose client used more than this many cores (of its one event loop) is client-bound."""
LOOP_LAG_BOUND_MS = 10.0
"""... or whose mean event-loop lag exceeded this."""
SHORTFALL_BOUND = 0.95
"""... or whose achieved concurrency (rate) was below this share of the target."""
MAX_ITL_SAMPLES = 500_000


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
) -> dict[str, Any]:
    """One step of the report from the requests that completed inside its window."""
    slo = slo or {}
    ttfts: list[float] = []
    e2es: list[float] = []
    tpots: list[float] = []
    itl_req: list[float] = []
    gaps = array("d")
    errors: dict[str, int] = {}
    n_ok = out_tokens = prompt_tokens = good = 0
    for r in results:
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
    reasons: list[str] = []
    if client_cpu is not None and client_cpu > CLIENT_CPU_BOUND:
        reasons.append(f"client CPU {client_cpu:.2f} cores")
    if loop_lag_ms is not None and loop_lag_ms > LOOP_LAG_BOUND_MS:
        reasons.append(f"event-loop lag {loop_lag_ms:.0f} ms")
    quiet = error_rate(n_ok, n_err) < 0.05 and retry_after_count == 0
    if (concurrency and achieved_concurrency is not None and quiet
            and achieved_concurrency < SHORTFALL_BOUND * concurrency):
        reasons.append(f"achieved concurrency {achieved_concurrency:.1f} < 95% of {concurrency}")
    if rate and achieved_rate is not None and quiet and achieved_rate < SHORTFALL_BOUND * rate:
        reasons.append(f"achieved rate {achieved_rate:.2f}/s < 95% of {rate:g}/s")
    return {
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
        "client_bound": bool(reasons),
        "client_bound_reasons": reasons,
        "client_cpu": client_cpu,
        "loop_lag_ms": loop_lag_ms,
        "loop_lag_max_ms": loop_lag_max_ms,
        "dispatch_lag_ms": dispatch_lag_ms,
    }
