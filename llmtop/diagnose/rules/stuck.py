"""``stuck``: an engine holds requests (running or waiting) but has made no token for
``STUCK_IDLE_S`` — vLLM's admission stall, vllm-project/vllm#53130 (running + deferred at
``max_num_seqs``, ``/health`` 200, KV ~20 %, ~0 tok/s). Stuck requests never finish, so no
latency histogram can show it: this reads the token counter itself
(``EngineRow.tokens_idle_s``) and the engine's own health endpoint
(``EngineRow.health_status``, asked by the monitor only while ``wants_health``):

* 2xx: the admission stall, the case a health check misses: "…; /health answers 200".
* 5xx, ``timeout`` or ``down`` while the metrics answer: not that stall — the engine is
  visibly unhealthy (its health check fails); the same id, worded so.
* not checked (no health path known: Ollama, Triton without its HTTP port; an old recording;
  fleet mode) or a code that judges nothing (401/403: the key; 404: no such path): only the
  metrics endpoint is known to answer, and the finding says just that.
"""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.thresholds import STUCK_HEALTH_PROBE_S, STUCK_IDLE_S
from llmtop.model import EngineRow

__all__ = ["stuck", "wants_health"]

_STALL_ACTION = ("take it out of the router's pool and restart it; a health check on /health "
                 "will not catch this (vLLM #53130): alert on the generated-token rate instead")
_SICK_ACTION = ("it fails its own health check: read its log for the error (vLLM answers 503 "
                "once its engine core died), restart it; a probe on its health endpoint should "
                "already take it out of the pool")


def wants_health(row: EngineRow) -> bool:
    """Whether the monitor asks this row's health endpoint now: its metrics answer, it holds
    requests and has made no token for ``STUCK_HEALTH_PROBE_S``."""
    held = (row.running or 0.0) + (row.waiting or 0.0)
    idle = row.tokens_idle_s
    return (row.state == "ok" and held > 0 and idle is not None
            and idle >= STUCK_HEALTH_PROBE_S)


def _verdict(health: int | str | None) -> str:
    """``ok`` (2xx), ``sick`` (5xx, timeout, down) or ``unknown``."""
    if isinstance(health, int):
        return "ok" if 200 <= health < 300 else "sick" if health >= 500 else "unknown"
    return "sick" if health in ("timeout", "down") else "unknown"


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
    path = "/v2/health/ready" if r.engine == "triton" else "/health"
    h = r.health_status
    verdict = _verdict(h)
    said = f"answers {h}" if isinstance(h, int) else f"does not answer ({h})"
    head = f"no token generated for {idle:.0f} s while it holds {load}"
    if verdict == "ok":
        summary = f"{head}; {path} {said}: the scheduler admits nothing"
        action = _STALL_ACTION
    elif verdict == "sick":
        summary = (f"{head}, and {path} {said} while its metrics endpoint answers: the engine "
                   "is unhealthy (not the admission stall a health check misses)")
        action = _SICK_ACTION
    else:
        why = "not checked" if h is None else f"answered {h}, which says nothing of its health"
        summary = (f"{head}, yet its metrics endpoint answers ({path} {why}): the scheduler "
                   "admits nothing")
        action = _STALL_ACTION
    evidence = [ctx.ev("tokens_idle_s", STUCK_IDLE_S, value=idle, baseline=False),
                ctx.ev("health", value=h if h is not None else "not checked", baseline=False),
                ctx.ev("running", value=r.running, baseline=False),
                ctx.ev("waiting", value=r.waiting, baseline=False),
                ctx.ev("gen_tok_s", value=r.generation_tokens_per_s, baseline=False)]
    if r.waiting_deferred is not None:
        evidence.append(ctx.ev("waiting_deferred", value=r.waiting_deferred, baseline=False))
    return [ctx.finding("stuck", "critical", summary, evidence, action)]
