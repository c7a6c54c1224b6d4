"""``diagnose``: run every rule over the windowed rows and order the findings.

Input: the rows (per engine and model, ranks folded in), a baseline per row key, the GPU
rows with their attribution, and optional per-row context (the smallest ``waiting`` over the
window, seconds since a restart). Output: findings, per engine root cause first. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from llmtop.diagnose.baseline import Baseline
from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.findings import EXPLAINS, Finding, order_findings
from llmtop.diagnose.log_citations import cite_log
from llmtop.diagnose.request_citations import cite, row_requests
from llmtop.diagnose.rules import ROW_RULES, STACK_RULES
from llmtop.diagnose.stack_ctx import stack_ctx
from llmtop.diagnose.thresholds import DIAG_WINDOW_S
from llmtop.model import GOOD_STATES, EngineRow, GpuRecord
from llmtop.model.logs import LogEvent
from llmtop.model.request_records import RequestRecord
from llmtop.model.stack import RouterRow

__all__ = ["diagnose", "gpus_by_target"]

SUPPRESSED_BY: dict[str, frozenset[str]] = {
    "decode_slowdown": frozenset({"kv_pressure", "long_prompts"}),
    "prefix_cache_miss": frozenset({"warming_up"}),
    "ttft_rise": frozenset(c for c, effects in EXPLAINS.items() if "ttft_rise" in effects),
}
"""A symptom not reported when one of these causes fired on the same row: the cause's
finding already names it (a decode slowdown "with no prompt, queue or KV cause"; a cold cache
after a restart is warming up, not a regression; a TTFT rise is reported only unexplained)."""


def gpus_by_target(gpus: Iterable[GpuRecord]) -> dict[str, list[GpuRecord]]:
    """GPUs per engine target, from the process attribution (``engine_target``)."""
    out: dict[str, list[GpuRecord]] = {}
    for g in gpus:
        for p in g.processes:
            t = p.engine_target
            if t and g not in out.setdefault(t, []):
                out[t].append(g)
    return out


def diagnose(
    rows: Sequence[EngineRow],
    *,
    baselines: Mapping[str, Baseline] | None = None,
    gpus: Sequence[GpuRecord] = (),
    gpu_baselines: Mapping[str, Baseline] | None = None,
    window_s: float = DIAG_WINDOW_S,
    waiting_min: Mapping[str, float] | None = None,
    restarted_ago_s: Mapping[str, float] | None = None,
    routers: Sequence[RouterRow] = (),
    requests: Sequence[RequestRecord] = (),
    logs: Mapping[str, Sequence[LogEvent]] | None = None,
) -> list[Finding]:
    """Findings for every good row (see the module doc); ``[]`` when all is well.
    ``routers``: the routers over the same window (rows linked to them by the store): the
    stack rules (``rules.STACK_RULES``) run over them and every row. ``requests``: the single
    requests that ended in the window (the engines' spans), cited by the findings they bear
    out (``diagnose.request_citations``). ``logs``: per target, the engine's log events in
    the window, cited by ``errors`` and ``stuck`` (``diagnose.log_citations``)."""
    baselines = baselines or {}
    waiting_min = waiting_min or {}
    restarted_ago_s = restarted_ago_s or {}
    on_gpu = gpus_by_target(gpus) if gpus else {}
    good = [r for r in rows if r.state in GOOD_STATES and r.model is not None]
    by_model: dict[str, list[EngineRow]] = {}
    for r in good:
        by_model.setdefault(r.model or "", []).append(r)
    found: list[Finding] = []
    for row in good:
        ctx = RowCtx(
            row=row,
            base=baselines.get(row.key),
            window_s=window_s,
            waiting_min=waiting_min.get(row.key),
            gpus=on_gpu.get(row.target, ()),
            gpu_base=gpu_baselines or {},
            siblings=[s for s in by_model[row.model or ""] if s.target != row.target],
            restarted_ago_s=restarted_ago_s.get(row.target),
            requests=row_requests(row, requests) if requests else (),
            log_events=logs.get(row.target, ()) if logs else (),
        )
        mine: list[Finding] = []
        for rule in ROW_RULES:
            mine.extend(cite_log(cite(f, ctx.requests, ctx.window), ctx.log_events,
                                 ctx.window) for f in rule(ctx))
        fired = {f.rule for f in mine}
        found.extend(f for f in mine if not (SUPPRESSED_BY.get(f.rule, frozenset()) & fired))
    if routers or any(r.role is not None for r in rows):
        ctx = stack_ctx(rows, routers, window_s, waiting_min)
        stacked = [f for rule in STACK_RULES for f in rule(ctx)]
        routed = {f.target for f in stacked if f.rule == "routing"}
        # the router's policy is the cause of a replica's imbalance: one finding, not two
        found = [f for f in found if not (f.rule == "imbalance" and f.target in routed)]
        found += stacked
    targets = list(dict.fromkeys([*(r.target for r in rows), *(r.target for r in routers)]))
    return order_findings(found, targets)
