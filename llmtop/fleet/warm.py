"""The fleet diagnosis' baseline from the server's own history (the warm-up).

A fleet row's baseline is its median over the last ``BASELINE_KEEP_S`` (15 min), the current
window left out (``llmtop.fleet.diagnosis``). Built from refreshes alone it needs 80 s to
start and 15 min to fill, and never starts at a fixed ``--at`` time. The Prometheus already
holds that history: ``fetch`` asks it with ONE range query per role of the refresh (gauges,
counters, buckets: ``Plan.queries()``, the lean plan: no detail-only histograms; and the
DCGM ``gpus`` role, on the fields the GPU baseline reads, so a GPU's usual SM clock is known
at start; not ``state``, the rules' context stays live-only) over the baseline span before
``t``, every ``WARM_STEP_S``, aligned to that step so caching frontends can reuse the
answer, and rebuilds the rows and GPUs at each timestamp with the instant builders
(``pinned.rows_at_times``, the plan's bucket layouts): the same numbers an instant refresh
at those times gives. ``WARM_STEP_S`` (180 s) gives 4 or 5 points older than the window:
the median needs 3, and at 500 instances each point costs about as much as a refresh (see
``docs/fleet.md``, Cost).

``warm`` feeds them to a ``FleetDiagnosis`` (``warm``: baseline points only, then the
refreshes judged meanwhile judged again). A failed or empty warm-up is not fatal: the
diagnosis starts cold, as it would without one, and an event-log line says so. A recording
keeps the raw answers (``Warmup.answers``, ``record.warm_record``); ``from_answers`` rebuilds
the same ``Warmup`` from them in a replay. Nothing here knows the monitor: it is given the
client, the plan and the window.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from llmtop.diagnose.thresholds import BASELINE_KEEP_S, BASELINE_MIN_POINTS
from llmtop.fleet.diagnosis import FleetDiagnosis
from llmtop.fleet.pinned import range_answers, rows_at_times
from llmtop.fleet.queries import Layouts, Plan, detail_only_names
from llmtop.model import EngineRow, GpuRecord
from llmtop.sources.prometheus import PromClient, PromError

__all__ = ["WARM_GPU_FIELDS", "WARM_ROLES", "WARM_STEP_S", "Warmup", "fetch", "from_answers",
           "pick_step", "span", "warm", "warm_plan", "warm_queries"]

WARM_STEP_S = 180.0
"""Seconds between the warm-up's points (4 or 5 over the 15-minute baseline span)."""
WARM_ROLES = ("gauges", "counters", "buckets", "gpus")
"""The refresh's query roles the warm-up asks over the span: the rows' and the DCGM GPUs'
(a GPU's usual SM clock and utilisation are baseline signals too)."""
WARM_GPU_FIELDS = ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_GPU_UTIL")
"""The DCGM fields of the refresh's ``gpus`` query the warm-up asks: the ones the GPU
baseline reads (``diagnose.baseline.GPU_SIGNALS``: SM clock, utilisation). The other ~9 of
dcgm-exporter's defaults would cost 5x more to read at every point and add nothing."""


@dataclass(slots=True)
class Warmup:
    """What one warm-up fetched: rows per past time, or why there are none."""

    t: float
    """The evaluation time it warms (the first refresh's)."""
    points: list[tuple[float, list[EngineRow]]] = field(default_factory=list)
    gpus: dict[float, list[GpuRecord]] = field(default_factory=dict)
    """The DCGM GPUs at each point's time (empty: no DCGM series in the history)."""
    answers: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The raw range answers (role -> result), kept only when asked (a recording)."""
    source: str = "prometheus_history"
    """Where the points came from: the server's history, or a ``recording`` of it."""
    start: float | None = None
    end: float | None = None
    step_s: float = WARM_STEP_S
    queries: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    """The failure in words (None: the server answered)."""

    def to_json(self, taken: int | None = None) -> dict[str, object]:
        """The ``baseline`` object of ``--once --json`` (``taken``: points the diagnosis
        took; None: the points fetched)."""
        return {"source": self.source, "start": self.start, "end": self.end,
                "step_s": self.step_s, "points": len(self.points) if taken is None else taken,
                "queries": self.queries, "partial": bool(self.warnings),
                "warnings": list(self.warnings), "error": self.error}


def span(t: float, window_s: float, step_s: float = WARM_STEP_S,
         keep_s: float = BASELINE_KEEP_S) -> tuple[float, float] | None:
    """(start, end) of the warm-up's range before ``t``: times aligned to ``step_s``, the
    first inside the baseline span ``(t - keep_s, ...]``, the last outside the current
    window (``<= t - window_s``): the points the baseline at ``t`` can use. None when that
    leaves fewer than ``BASELINE_MIN_POINTS`` (a window as long as the span)."""
    step_s = max(1.0, step_s)
    start = (math.floor((t - keep_s) / step_s) + 1) * step_s
    end = math.floor((t - window_s) / step_s) * step_s
    if end < start or (end - start) / step_s + 1 < BASELINE_MIN_POINTS:
        return None
    return start, end


def pick_step(window_s: float, keep_s: float = BASELINE_KEEP_S) -> float:
    """``WARM_STEP_S``, or a shorter step (a multiple of 10 s) when a long window leaves it
    fewer than ``BASELINE_MIN_POINTS + 1`` points in the baseline span (a 600 s window: 60 s,
    4 or 5 points in the 300 s left); the cost stays that of ~5 points."""
    rng = span(0.0, window_s, WARM_STEP_S, keep_s)
    if rng is not None and (rng[1] - rng[0]) / WARM_STEP_S + 1 > BASELINE_MIN_POINTS:
        return WARM_STEP_S
    return max(10.0, math.floor((keep_s - window_s) / (BASELINE_MIN_POINTS + 2) / 10) * 10)


def warm_plan(plan: Plan) -> Plan:
    """``plan`` without the histograms only the detail screen shows (as the TUI's lean
    plan) and with only the DCGM fields the GPU baseline reads (``WARM_GPU_FIELDS``): the
    baseline's signals come from the others."""
    lean = plan.detail_only or detail_only_names(plan.names)
    names = {n: k for n, k in plan.names.items() if k != "dcgm" or n in WARM_GPU_FIELDS}
    if lean == plan.detail_only and len(names) == len(plan.names):
        return plan
    return dataclasses.replace(plan, detail_only=lean, names=names)


def warm_queries(plan: Plan) -> dict[str, str]:
    """The warm-up's range queries: the refresh's ``WARM_ROLES`` of the lean plan."""
    return {role: q for role, q in warm_plan(plan).queries().items()
            if role.split("#")[0] in WARM_ROLES}


def from_answers(t: float, answers: dict[str, list[dict[str, Any]]], group: tuple[str, ...],
                 window_s: float, layouts: Layouts | None, *, start: float | None,
                 end: float | None, step_s: float, queries: int, warnings: list[str],
                 error: str | None = None, source: str = "prometheus_history") -> Warmup:
    """The ``Warmup`` of range ``answers`` (role -> result): what ``fetch`` builds from the
    server's answers, and a replay from the recorded ones (no I/O)."""
    out = Warmup(t=t, step_s=step_s, start=start, end=end, queries=queries,
                 warnings=list(warnings), error=error, source=source)
    if error is None:
        for ts, rows, gpus in rows_at_times(answers, group, window_s, layouts):
            if rows:
                out.points.append((ts, rows))
            if gpus:
                out.gpus[ts] = gpus
    return out


async def fetch(client: PromClient, plan: Plan | None, t: float, window_s: float,
                step_s: float | None = None, *, keep_answers: bool = False) -> Warmup:
    """Rows and GPUs at the warm-up's times before ``t`` (see the module doc), asked through
    ``client`` with the lean plan (``warm_plan``) of ``plan`` and rates over ``window_s``;
    ``keep_answers``: keep the raw answers (``Warmup.answers``, for a recording). Never
    raises."""
    step = pick_step(window_s) if step_s is None else step_s
    out = Warmup(t=t, step_s=step)
    if plan is None:
        out.error = "not connected"
        return out
    rng = span(t, window_s, step)
    if rng is None:
        out.error = f"the {window_s:g} s window leaves no baseline span"
        return out
    start, end = rng
    queries = warm_queries(plan)
    try:
        answers, warnings = await range_answers(client, queries, start, end, step)
    except PromError as exc:
        out.start, out.end, out.queries = start, end, len(queries)
        out.error = f"{exc.kind}: {exc.message}"
        return out
    out = from_answers(t, answers, plan.group, window_s, plan.layouts, start=start, end=end,
                       step_s=step, queries=len(queries), warnings=warnings)
    if keep_answers:
        out.answers = answers
    return out


def warm(diag: FleetDiagnosis, got: Warmup) -> Warmup:
    """Seed ``diag`` with what a warm-up fetched (its ``begin_warm`` called before the
    refresh at ``got.t`` was judged); an event-log line says how it went. Returns ``got``."""
    t = got.t
    ago = (f"{t - got.start:.0f} s to {t - got.end:.0f} s before"
           if got.start is not None and got.end is not None else "before")
    where = "the server's history"  # a replay's too: the recorded answers are that history
    if got.error is not None or not (got.points or got.gpus):
        if diag.warm_failed(t):  # else: a travel or a reset since, nothing to say
            why = got.error or "the server holds no history before this time"
            diag.note(t, "warn", f"diagnosis: no baseline from {where} ({why}); "
                      "relative rules apply once the refreshes have built one")
        return got
    taken = diag.warm(got.points, t, got.gpus)
    if taken is None:  # a travel or a reset since: the history is of another time
        return got
    rows = len({r.key for _, rows in got.points for r in rows})
    gpus = len({(g.host, g.index) for gs in got.gpus.values() for g in gs})
    also = f", {gpus} GPUs" if gpus else ""
    part = " (PARTIAL answer: the baseline may miss series)" if got.warnings else ""
    if taken < BASELINE_MIN_POINTS:
        diag.note(t, "warn", f"diagnosis: only {taken} point(s) of {where} "
                  f"({ago}, {rows} rows{also}){part}: relative rules wait for more")
    else:
        diag.note(t, "info", f"diagnosis: baseline from {where}: {taken} "
                  f"points {got.step_s:g} s apart ({ago}), {rows} rows{also}{part}")
    return got
