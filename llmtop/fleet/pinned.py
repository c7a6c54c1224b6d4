"""One fleet row's queries, pinned to its group labels: its past refreshes for the
sparklines (``history``) and its values at other rate windows for the detail screen
(``row_windows``). A small fixed number of queries per call, never one per instance.

Also the range-query row builder the warm-up shares (``range_answers`` then
``rows_at_times``: the instant row builder at each timestamp). Nothing here knows the
monitor: each function is given the client, the latest snapshot and the plan it needs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llmtop.fleet.queries import Layouts, Matcher, Plan, align, engine_of
from llmtop.fleet.rows import build_rows, gpu_records, split_groups
from llmtop.model import EngineRow, GpuRecord, Snapshot
from llmtop.sources.prometheus import PromClient, PromError

__all__ = ["History", "Windows", "history", "locate", "pick", "range_answers", "range_rows",
           "row_windows", "rows_at_times"]


class History(list[tuple[float, EngineRow | None]]):
    """``history``'s answer: (time, row) pairs, a plain list to its callers, plus
    ``partial`` (a range answer was partial: Thanos ``warnings``, VictoriaMetrics
    ``isPartial``) and the backend's ``warnings``."""

    def __init__(self, *args: Any, warnings: Iterable[str] = ()) -> None:
        super().__init__(*args)
        self.warnings: list[str] = list(dict.fromkeys(warnings))
        self.partial = bool(self.warnings)


class Windows(dict[float, EngineRow | None]):
    """``row_windows``' answer: window (s) -> row, a plain dict to its callers, plus
    ``partial``: window -> the backend's warnings for each window whose row came from a
    partial answer (Thanos ``warnings``, VictoriaMetrics ``isPartial``); a window that is
    not in ``partial`` was answered in full."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.partial: dict[float, list[str]] = {}

    def mark(self, window: float, warnings: Iterable[str]) -> None:
        """``window``'s row came from a partial answer saying ``warnings``."""
        have = self.partial.setdefault(window, [])
        for w in warnings:
            if w not in have:
                have.append(w)
        if not have:
            have.append("the server answered with partial data")


def _pinned(plan: Plan, row: EngineRow, window_s: float) -> Plan:
    """``plan`` for ``row`` alone: its group labels pinned, its engine's names only, every
    histogram whole (no layouts, no detail-only names: one row costs little)."""
    labels = row.labels or {}
    pin = [Matcher(g, "=", labels.get(g, "")).text() for g in plan.group]
    names = {n: k for n, k in plan.names.items() if engine_of(n) == row.engine}
    return Plan(group=plan.group, window_s=window_s, matchers=[*plan.matchers, *pin],
                target_matchers=plan.target_matchers, names=names, engines=plan.engines)


def locate(rows: list[EngineRow], key: str) -> tuple[EngineRow | None, EngineRow | None]:
    """(top-level row, the row itself) of ``key``: a row or one of its ranks."""
    for r in rows:
        if r.key == key:
            return r, r
        for rr in r.ranks:
            if rr.key == key:
                return r, rr
    return None, None


def pick(rows: list[EngineRow], key: str, top: EngineRow, row: EngineRow
         ) -> EngineRow | None:
    """The row of a pinned answer that is ``row``: by key, else (a group of mixed engines
    keys rows by engine too, a pinned answer holds one) by model and rank, rekeyed."""
    r = locate(rows, key)[1]
    t = next((t for t in rows if (t.model, t.engine) == (top.model, top.engine)), None)
    if r is None and t is not None:
        r = t if row is top else next((x for x in t.ranks if x.rank == row.rank), None)
        if r is not None:
            r.key = key
    return r


async def history(client: PromClient, snap: Snapshot | None, plan: Plan | None, key: str,
                  step: float, points: int = 90) -> History:
    """The row ``key`` at ``points`` past refresh times (``step`` apart) up to the latest
    snapshot ``snap``, from one range query per role (gauges, counters, buckets) on that
    row's group and engine only (``plan`` pinned): sparklines start full instead of empty.
    [] when unknown; never raises. A partial answer says so (``History.partial``,
    ``.warnings``)."""
    row = next((r for r in snap.engines if r.key == key), None) if snap else None
    if snap is None or plan is None or row is None or row.labels is None:
        return History()
    end = align(snap.time, step)
    start = end - (max(2, points) - 1) * step
    queries = [q for k, q in _pinned(plan, row, plan.window_s).queries().items()
               if k.split("#")[0] in ("gauges", "counters", "buckets")]
    try:
        past, warns = await range_rows(client, queries, start, end, step, plan.group,
                                       plan.window_s)
    except PromError:
        return History()
    return History(((ts, next((r for r in rows if r.key == key), None)) for ts, rows in past),
                   warnings=warns)


async def range_answers(client: PromClient, queries: Mapping[str, str], start: float,
                        end: float, step: float
                        ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """One range query per entry of ``queries`` (role -> PromQL; ``start`` to ``end`` every
    ``step``): role -> the API's ``result`` list as received, and the answers' warnings (a
    partial answer has one). Raises ``PromError``."""
    roles = list(queries)
    answers = await asyncio.gather(*(client.query_range(queries[r], start, end, step)
                                     for r in roles))
    warnings = [w for res in answers for w in res.warnings]
    return {r: res.result for r, res in zip(roles, answers, strict=True)}, warnings


def rows_at_times(answers: Mapping[str, list[dict[str, Any]]], group: tuple[str, ...],
                  window_s: float, layouts: Layouts | None = None
                  ) -> list[tuple[float, list[EngineRow], list[GpuRecord]]]:
    """Range answers (role or ``role#N`` -> series with ``values``) as (time, rows, GPUs)
    per timestamp, oldest first: the rows rebuilt by the instant row builder (rates over
    ``window_s``; ``layouts``: as ``build_rows``), the ``gpus`` role's DCGM series read by
    the refresh's GPU reader. Rows carry no states. ``answers`` is not changed (a
    recording's answers are read again on a seek)."""
    by_time: dict[float, list[dict[str, Any]]] = {}
    gpu_time: dict[float, list[dict[str, Any]]] = {}
    for role, result in answers.items():
        into = gpu_time if role.split("#")[0] == "gpus" else by_time
        for series in result:
            metric = series.get("metric") or {}
            for ts, v in series.get("values") or ():
                into.setdefault(float(ts), []).append({"metric": dict(metric), "value": [ts, v]})
    out: list[tuple[float, list[EngineRow], list[GpuRecord]]] = []
    for ts in sorted(by_time.keys() | gpu_time.keys()):
        items = by_time.pop(ts, None)
        rows = build_rows(split_groups([items], group), group, window_s, layouts)[0] \
            if items else []
        g = gpu_time.pop(ts, None)
        groups = split_groups([g], ()) if g else {}
        out.append((ts, rows, gpu_records(groups[()].series) if groups else []))
    return out


async def range_rows(client: PromClient, queries: Iterable[str], start: float, end: float,
                     step: float, group: tuple[str, ...], window_s: float,
                     layouts: Layouts | None = None
                     ) -> tuple[list[tuple[float, list[EngineRow]]], list[str]]:
    """The rows at each time of one range query per query in ``queries`` (``start`` to
    ``end`` every ``step``), oldest first (``rows_at_times``, no GPUs), and the answers'
    warnings. Raises ``PromError``."""
    asked = {f"q#{i}": q for i, q in enumerate(queries)}
    answers, warnings = await range_answers(client, asked, start, end, step)
    return [(ts, rows) for ts, rows, _ in rows_at_times(answers, group, window_s, layouts)
            ], warnings


async def row_windows(client: PromClient, snap: Snapshot | None, plan: Plan | None, key: str,
                      windows: Iterable[float], *, window_s: float,
                      window_note: Callable[[float], str | None],
                      partial: list[str] | None = None) -> Windows:
    """Row ``key`` of the latest snapshot at other rate windows (the detail screen's
    10 s / 1 m / 5 m), at that snapshot's own evaluation time: instant queries pinned to
    the row's group labels and engine: its counters and buckets per window (a union
    split only past ``MAX_QUERY_CHARS``), no gauges (they have no window: the fleet row
    has them, so the rows here leave them None). The fleet window is the snapshot's own
    row (asked too when the plan leaves detail-only buckets out: ``detail_only``); a
    window with a ``window_note`` (``rate()`` gives nothing) is None, as is every asked
    window when a query fails. A window whose row came from a partial answer (its own
    queries', or the refresh's for the fleet window's row) is in ``.partial`` with the
    backend's warnings. ``window_s``: the fleet window (``snap``'s); ``window_note``: why a
    window gives nothing (the monitor's); ``partial``: the refresh's own warnings when it
    was partial (None: it was complete). Never raises."""
    ws = list(dict.fromkeys(float(w) for w in windows))
    out = Windows(dict.fromkeys(ws))
    top, row = locate(snap.engines if snap else [], key)
    if snap is None or plan is None or top is None or row is None or top.labels is None:
        return out
    ask = []
    for w in ws:
        own = abs(w - window_s) < 1e-6
        if own:
            out[w] = row
            if partial is not None:
                out.mark(w, partial)
        if (own and plan.detail_only) or (
                not own and window_note(w) is None):
            ask.append(w)
    if not ask:
        return out
    jobs: list[tuple[float, str]] = []
    for w in ask:
        jobs += [(w, q) for role, q in _pinned(plan, top, w).queries().items()
                 if role.split("#")[0] in ("counters", "buckets")]
    try:
        answers = await asyncio.gather(*(client.query(q, snap.time) for _, q in jobs))
    except PromError:
        return out
    for w in ask:
        mine = [r for (ww, _), r in zip(jobs, answers, strict=True) if ww == w]
        rows, _ = build_rows(split_groups([r.result for r in mine], plan.group),
                             plan.group, w)
        out[w] = pick(rows, key, top, row)
        out.partial.pop(w, None)  # the fleet window's row, asked again: this answer's
        if any(r.partial for r in mine):
            out.mark(w, [x for r in mine for x in r.warnings])
    return out
