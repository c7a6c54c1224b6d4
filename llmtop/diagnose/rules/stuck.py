"""``stuck``: an engine holds requests (running or waiting) but has made no token for
``STUCK_IDLE_S`` while it still answers — vLLM issue #53130's admission stall (running +
deferred at ``max_num_seqs``, ``/health`` 200, KV ~20 %, ~0 tok/s). Stuck requests never
finish, so no latency histogram can show it: this reads the token counter itself
(``EngineRow.tokens_idle_s``). "Still answers": its ``/metrics`` scrape succeeds (state ok),
the same process that serves ``/health``.
"""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.thresholds import STUCK_IDLE_S

__all__ = ["stuck"]


def stuck(ctx: RowCtx) -> list[Finding]:
    """The finding when the row is stuck (see the module doc), else []."""
    r = ctx.row
    idle = r.tokens_idle_s
    held = (r.running or 0.0) + (r.waiting or 0.0)
    if idle is None or idle < STUCK_IDLE_S or held <= 0 or r.state != "ok":
        return []
    parts = [f"{r.running:.0f} running" if r.running is not None else "",
             f"{r.waiting:.0f} waiting" if r.waiting is not None else "",
             f"{r.waiting_deferred:.0f} of them deferred" if r.waiting_deferred else "",
             f"KV {fmt_pct(r.kv_cache_usage)}" if r.kv_cache_usage is not None else ""]
    load = ", ".join(p for p in parts if p)
    summary = (f"no token generated for {idle:.0f} s while it holds {load}, yet it answers"
               " (its metrics endpoint, like /health, says 200): the scheduler admits nothing")
    evidence = [ctx.ev("tokens_idle_s", STUCK_IDLE_S, value=idle, baseline=False),
                ctx.ev("running", value=r.running, baseline=False),
                ctx.ev("waiting", value=r.waiting, baseline=False),
                ctx.ev("gen_tok_s", value=r.generation_tokens_per_s, baseline=False)]
    if r.waiting_deferred is not None:
        evidence.append(ctx.ev("waiting_deferred", value=r.waiting_deferred, baseline=False))
    action = ("take it out of the router's pool and restart it; a health check on /health "
              "will not catch this (vLLM #53130): alert on the generated-token rate instead")
    return [ctx.finding("stuck", "critical", summary, evidence, action)]
