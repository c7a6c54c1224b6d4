"""The TTFT path of a router's requests, split where numbers exist:
router → prefill queue → prefill → transfer / decode-pending → decode → first token.

Means (they add; p95s do not), over the window, from the router's own histograms and its
backends' engine rows: ``router`` = the router's TTFT (else its request time) minus the
backends' (a non-negative remainder); ``prefill_queue`` and ``prefill`` from the prefill pool
(every backend without P/D); ``transfer`` from the router's decode-pending time, else the
decode pool's SGLang stages (bootstrap + KV wait), else the engines' KV-transfer time;
``decode_queue`` from the decode pool; ``first_token`` = what is left of the decode pool's
TTFT (P/D), or of the backends' TTFT after queue and prefill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llmtop.model import EngineRow, Quantiles
from llmtop.model.stack import RouterRow
from llmtop.topology.pools import mean_of

__all__ = ["COUNT_MATCH", "STAGES", "Stage", "ttft_path"]

COUNT_MATCH = 0.25
"""The router's and its backends' request counts in the window must agree within this share
before their means are subtracted: otherwise they measured different requests (the router
also proxies other routes, or its window saw a burst the engines' did not)."""

STAGES = ("router", "prefill_queue", "prefill", "transfer", "decode_queue", "first_token")


@dataclass(frozen=True, slots=True)
class Stage:
    """One stage of the TTFT path: mean seconds and where the number comes from."""

    name: str
    seconds: float
    source: str


def _mean(q: Quantiles | None) -> float | None:
    return q.mean if q is not None and q.count and q.mean is not None else None


def _same_requests(a: Quantiles | None, rows: Sequence[EngineRow], attr: str) -> bool:
    n = sum(q.count for r in rows if (q := getattr(r, attr)) is not None)
    return a is not None and n > 0 and abs(a.count - n) <= COUNT_MATCH * max(a.count, n)


def _left(total: float | None, *parts: float | None) -> float | None:
    if total is None:
        return None
    return max(0.0, total - sum(p for p in parts if p is not None))


def _decode_wait(dec: Sequence[EngineRow]) -> float | None:
    """SGLang's decode-side P/D stages (``decode_bootstrap`` + ``decode_transferred``: from
    KV preallocation until the KV arrived), mean over the decode pool; None unless both."""
    stages = [r.kv_transfer.stages or {} for r in dec if r.kv_transfer is not None]
    parts = [mean_of(st.get(s) for st in stages) for s in ("decode_bootstrap",
                                                         "decode_transferred")]
    return None if None in parts else sum(p for p in parts if p is not None)


def ttft_path(router: RouterRow, engines: Sequence[EngineRow]) -> list[Stage]:
    """The stages with a number, in path order ([] when none has one)."""
    rows = [r for r in engines if r.router == router.target and r.rank is None]
    pd = any(r.role in ("prefill", "decode") for r in rows)
    pre = [r for r in rows if r.role == "prefill"] if pd else rows
    dec = [r for r in rows if r.role == "decode"] if pd else []
    vals: dict[str, tuple[float | None, str]] = {}
    backend_ttft = mean_of(r.ttft_s for r in (dec or pre))
    queue = mean_of(r.queue_s for r in pre)
    prefill = mean_of(r.prefill_s for r in pre)
    if _mean(router.ttft_s) is not None and _same_requests(router.ttft_s, dec or pre, "ttft_s"):
        vals["router"] = (_left(_mean(router.ttft_s), backend_ttft), "router TTFT − backends'")
    elif (_mean(router.request_s) is not None and not pd
          and _same_requests(router.request_s, rows, "e2e_s")):
        e2e = mean_of(r.e2e_s for r in rows)
        vals["router"] = (_left(_mean(router.request_s), e2e), "router request − backends' e2e")
    vals["prefill_queue"] = (queue, "prefill pool queue time")
    vals["prefill"] = (prefill, "prefill pool prefill time")
    transfer = _mean(router.decode_pending_s)
    src = "router decode-pending"
    if transfer is None and dec:
        transfer = _decode_wait(dec)
        src = "decode pool bootstrap + KV wait"
    if transfer is None:
        transfer = mean_of(r.kv_transfer.time_s for r in rows if r.kv_transfer is not None)
        src = "engines' KV transfer time"
    vals["transfer"] = (transfer, src)
    if pd:
        dq = mean_of(r.queue_s for r in dec)
        vals["decode_queue"] = (dq, "decode pool queue time")
        vals["first_token"] = (_left(backend_ttft, dq, transfer), "decode pool TTFT, rest")
    else:
        vals["first_token"] = (_left(backend_ttft, queue, prefill), "backends' TTFT, rest")
    out = []
    for name in STAGES:
        v, src = vals.get(name, (None, ""))
        if v is not None:
            out.append(Stage(name, v, src))
    return out
