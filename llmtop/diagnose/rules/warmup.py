"""``warming_up``: the engine restarted a moment ago; its caches are cold (info)."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import WARMUP_S

__all__ = ["warming_up"]


def warming_up(c: RowCtx) -> list[Finding]:
    """Restarted less than WARMUP_S ago (as seen by llmtop)."""
    ago = c.restarted_ago_s
    if ago is None or ago > WARMUP_S:
        return []
    summary = f"restarted {ago:.0f} s ago: caches are cold"
    hr, hb = c.sig("hit_rate"), c.usual("hit_rate")
    if hr is not None:
        summary += f" (prefix hit rate {fmt_pct(hr)}" + (
            f", usually {fmt_pct(hb)})" if hb is not None else ")")
    ev = [Evidence("restarted_ago_s", ago, "now", None, WARMUP_S), c.ev("hit_rate")]
    return [c.finding("warming_up", "info", summary, ev,
                      "wait for it to warm up; find why it restarted in its log")]
