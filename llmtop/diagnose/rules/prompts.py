"""``long_prompts`` (the prompt mix changed) and ``prefix_cache_miss`` (reuse collapsed):
the two causes of a prefill and TTFT rise that are not the server's speed."""

from __future__ import annotations

from llmtop.diagnose.compare import compare
from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_tok, fmt_x
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.signals import count
from llmtop.diagnose.thresholds import (
    HIT_ABS_DROP,
    HIT_BASE_MIN,
    HIT_REL,
    MIN_REQUESTS,
    PROMPT_ABS_TOKENS,
    PROMPT_X,
    SLOWER_X,
)

__all__ = ["long_prompts", "prefix_cache_miss", "slower"]


def slower(c: RowCtx) -> tuple[bool | None, list[Evidence], str]:
    """Is prefill (else TTFT) p95, or where buckets are too coarse its mean (``compare``), at
    least SLOWER_X its usual? (None: cannot tell), the evidence, and words for the summary."""
    for prefix in ("prefill", "ttft"):
        ch = compare(c, prefix, "p95", SLOWER_X)
        if ch is not None:
            return ch.up, list(ch.evidence), ch.words if ch.up else ""
    return None, [], ""


def long_prompts(c: RowCtx) -> list[Finding]:
    """Prompt-length median or p90 at least PROMPT_X its usual (+PROMPT_ABS_TOKENS)."""
    if count(c.row, "prompt_len") < MIN_REQUESTS:
        return []
    hit = None
    for name in ("prompt_p50", "prompt_p90"):
        v, b = c.sig(name), c.usual(name)
        if v is not None and b is not None and v >= PROMPT_X * b and v - b >= PROMPT_ABS_TOKENS:
            hit = (name, v, b)
            break
    if hit is None:
        return []
    name, v, b = hit
    up, ev, words = slower(c)
    label = "median" if name == "prompt_p50" else "p90"
    summary = f"prompts got longer: {label} {fmt_tok(v)}{fmt_x(v, b, fmt_tok)}"
    if words:
        summary += f"; {words}"
    hr, hb = c.sig("hit_rate"), c.usual("hit_rate")
    if hr is not None and hb is not None:
        summary += f"; prefix hit rate {fmt_pct(hr)} ({fmt_pct(hb)} usual)"
    evidence = [c.ev(name, PROMPT_X * b), *ev, c.ev("hit_rate")]
    action = ("the traffic changed, not the server: tokens/s holds while requests/s falls; "
              "consider a larger --max-num-batched-tokens (chunked-prefill budget) or a "
              "separate replica for long-context traffic")
    return [c.finding("long_prompts", "info" if up is False else "warn", summary, evidence,
                      action)]


def prefix_cache_miss(c: RowCtx) -> list[Finding]:
    """Windowed prefix hit rate far below the engine's usual one."""
    hr, hb = c.sig("hit_rate"), c.usual("hit_rate")
    if hr is None or hb is None or hb < HIT_BASE_MIN:
        return []
    if hr > HIT_REL * hb or hb - hr < HIT_ABS_DROP:
        return []
    n = max(count(c.row, "ttft_s"), count(c.row, "prompt_len"),
            (c.row.requests_per_s or 0.0) * c.window_s)
    if n < MIN_REQUESTS:
        return []
    up, ev, words = slower(c)
    usually = ("over its lifetime before this window" if c.base is not None and c.base.lifetime
               else "usually")
    summary = f"prefix-cache hit rate {fmt_pct(hr)}, {usually} {fmt_pct(hb)}"
    pv, pb = c.sig("prompt_p50"), c.usual("prompt_p50")
    if pv is not None and pb is not None:
        summary += f"; prompts unchanged (median {fmt_tok(pv)})" if pv < PROMPT_X * pb else ""
    if words:
        summary += f"; {words}"
    evidence = [c.ev("hit_rate", HIT_REL * hb), *ev, c.ev("prompt_p50")]
    action = ("compare the first tokens of prompts before and after (a timestamp or id at the "
              "start of the system prompt defeats reuse); check the router's affinity")
    return [c.finding("prefix_cache_miss", "info" if up is False else "warn", summary,
                      evidence, action)]
