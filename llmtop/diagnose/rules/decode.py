"""``decode_slowdown`` (each token got slower), ``spec_decode_drop`` (the draft stopped
being accepted) and ``ttft_rise`` (TTFT far above usual with no cause found)."""

from __future__ import annotations

from llmtop.diagnose.compare import compare
from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_s, fmt_x
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.signals import count
from llmtop.diagnose.thresholds import (
    DECODE_ABS_S,
    DECODE_CRIT_X,
    DECODE_RUNNING_X,
    DECODE_X,
    MIN_REQUESTS,
    MIN_TOKENS,
    SPEC_ABS_DROP,
    SPEC_REL,
    TTFT_ABS_S,
    TTFT_X,
)

__all__ = ["decode_slowdown", "spec_decode_drop", "ttft_rise"]


def decode_slowdown(c: RowCtx) -> list[Finding]:
    """ITL p50 (else TPOT p50) at least DECODE_X its usual, with the batch not grown."""
    if count(c.row, "itl_s") >= MIN_TOKENS and c.sig("itl_p50") is not None:
        prefix = "itl"
    elif count(c.row, "tpot_s") >= MIN_REQUESTS and c.sig("tpot_p50") is not None:
        prefix = "tpot"
    else:
        return []
    ch = compare(c, prefix, "p50", DECODE_X, DECODE_ABS_S)
    if ch is None or not ch.up:
        return []
    v, b = ch.value, ch.base
    r, rb = c.row.running, c.usual("running")
    if r is not None and rb is not None and r > DECODE_RUNNING_X * rb + 2:
        return []  # a bigger batch: load, not a slowdown
    summary = f"decode got slower: {ch.label} {fmt_s(v)}{fmt_x(v, b, fmt_s)}"
    if r is not None:
        summary += f" with {r:.0f} running" + (f" ({rb:.0f} usual)" if rb is not None else "")
    ev = [*ch.evidence, c.ev("running"), c.ev("prompt_p50"), c.ev("spec_accept")]
    action = ("look at the GPU under the engine (clocks, other processes on it), then the "
              "engine version or settings that changed")
    return [c.finding("decode_slowdown", "critical" if v >= DECODE_CRIT_X * b else "warn",
                      summary, ev, action)]


def spec_decode_drop(c: RowCtx) -> list[Finding]:
    """Speculative-decoding acceptance far below its usual."""
    a, b = c.sig("spec_accept"), c.usual("spec_accept")
    if a is None or b is None or a > SPEC_REL * b or b - a < SPEC_ABS_DROP:
        return []
    n = max(count(c.row, "ttft_s"), (c.row.requests_per_s or 0.0) * c.window_s)
    if n < MIN_REQUESTS:
        return []
    summary = (f"speculative decoding: {fmt_pct(a)} of draft tokens accepted, usually "
               f"{fmt_pct(b)}: each step yields fewer tokens")
    action = ("the draft no longer predicts this traffic: check what changed in it (task, "
              "language); consider fewer speculative tokens or none for it")
    return [c.finding("spec_decode_drop", "warn", summary, [c.ev("spec_accept", SPEC_REL * b)],
                      action)]


def ttft_rise(c: RowCtx) -> list[Finding]:
    """TTFT p95 at least TTFT_X its usual (+TTFT_ABS_S); kept only when no cause explains it."""
    if count(c.row, "ttft_s") < MIN_REQUESTS:
        return []
    v, b = c.sig("ttft_p95"), c.usual("ttft_p95")
    if v is None or b is None or v < TTFT_X * b or v - b < TTFT_ABS_S:
        return []
    parts = [f"TTFT p95 {fmt_s(v)}{fmt_x(v, b, fmt_s)}"]
    for name, label in (("queue_p95", "queue"), ("prefill_p95", "prefill")):
        x, xb = c.sig(name), c.usual(name)
        if x is not None:
            parts.append(f"{label} p95 {fmt_s(x)}" + (f" ({fmt_s(xb)} usual)" if xb else ""))
    ev = [c.ev("ttft_p95", TTFT_X * b), c.ev("queue_p95"), c.ev("prefill_p95"),
          c.ev("running")]
    action = "none of llmtop's causes fired: compare queue and prefill time with their usual"
    return [c.finding("ttft_rise", "warn", "; ".join(parts), ev, action)]
