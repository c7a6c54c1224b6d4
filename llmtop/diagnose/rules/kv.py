"""``kv_pressure``: the KV cache is full, so requests are preempted (recomputed) or wait."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.thresholds import KV_CRIT, KV_FULL, PREEMPT_CRIT_PER_S, PREEMPT_MIN_EVENTS

__all__ = ["kv_action", "kv_pressure"]


def kv_action(engine: str | None, retracting: bool = True) -> str:
    """What the engine's own docs say to do about KV pressure (SGLang: retractions mean
    it admits on too small a guess of the outputs; a full pool without them, that the
    pool is too small for the requests it holds)."""
    if engine == "vllm":
        return ("raise --gpu-memory-utilization if memory allows, lower --max-num-seqs or "
                "--max-num-batched-tokens, or add tensor parallelism or a replica")
    if engine == "sglang" and not retracting:
        return ("give the token pool more room: raise --mem-fraction-static, or "
                "--max-total-tokens where it is set, or add a replica")
    if engine == "sglang":
        return ("raise --schedule-conservativeness (e.g. 1.3) or --mem-fraction-static, "
                "or add a replica")
    return ("give the KV cache more memory, admit fewer concurrent sequences, "
            "or add a replica")


def kv_pressure(c: RowCtx) -> list[Finding]:
    """KV usage >= KV_FULL with a queue, or preemptions in the window (any KV reading)."""
    row = c.row
    kv, p, w = row.kv_cache_usage, row.preemptions_per_s, row.waiting
    preempting = p is not None and p * c.window_s >= PREEMPT_MIN_EVENTS
    full = kv is not None and kv >= KV_FULL
    if not (preempting or (full and (w or 0) >= 1)):
        return []
    critical = (p is not None and p >= PREEMPT_CRIT_PER_S) or (
        preempting and kv is not None and kv >= KV_CRIT)
    parts = [f"KV cache {fmt_pct(kv)} full" if kv is not None else "KV cache short"]
    if preempting and p is not None:
        word = "retractions" if row.engine == "sglang" else "preemptions"
        parts.append(f"{p:.2g} {word}/s (preempted requests are recomputed from scratch)")
    if w:
        parts.append(f"{w:.0f} waiting")
    ev = [c.ev("kv", KV_FULL),
          c.ev("preemptions_per_s", PREEMPT_MIN_EVENTS / c.window_s, p, baseline=False),
          c.ev("waiting", 1.0)]
    return [c.finding("kv_pressure", "critical" if critical else "warn",
                      ": ".join(parts[:1]) + (": " + ", ".join(parts[1:]) if parts[1:] else ""),
                      ev, kv_action(row.engine, preempting))]
