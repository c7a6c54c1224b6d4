"""One fleet row's queries, pinned to its group labels: its past refreshes for the
sparklines (``history``) and its values at other rate windows for the detail screen
(``row_windows``). A small fixed number of queries per call, never one per instance."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from llmtop.fleet.queries import Layouts, Matcher, Plan, align, engine_of
from llmtop.fleet.rows import build_rows, split_groups
from llmtop.model import EngineRow
from llmtop.sources.prometheus import PromClient, PromError

if TYPE_CHECKING:
    from llmtop.fleet.monitor import FleetMonitor

__all__ = ["History", "Windows", "history", "locate", "pick", "range_rows", "row_windows"]


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


def _refresh_warnings(mon: FleetMonitor) -> list[str]:
    """The latest refresh's own query warnings: not the connect notes, not the header's
    ``PARTIAL`` line."""
    skip = set(getattr(mon, "_connect_warnings", ()))
    return [w for w in mon.warnings if w not in skip and not w.startswith("PARTIAL:")]


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


async def history(mon: FleetMonitor, key: str, points: int = 90) -> History:
    """The row ``key`` at ``points`` past refresh times up to the latest snapshot, from one
    range query per role (gauges, counters, buckets) on that row's group and engine only:
    sparklines start full instead of empty. [] when unknown; never raises. A partial answer
    says so (``History.partial``, ``.warnings``)."""
    snap, plan = mon._last, mon.plan
    row = next((r for r in snap.engines if r.key == key), None) if snap else None
    if snap is None or plan is None or row is None or row.labels is None:
        return History()
    step = mon.refresh_s
    end = align(snap.time, step)
    start = end - (max(2, points) - 1) * step
    queries = [q for k, q in _pinned(plan, row, plan.window_s).queries().items()
               if k.split("#")[0] in ("gauges", "counters", "buckets")]
    try:
        past, warns = await range_rows(mon.client, queries, start, end, step, plan.group,
                                       mon.window_s)
    except PromError:
        return History()
    return History(((ts, next((r for r in rows if r.key == key), None)) for ts, rows in past),
                   warnings=warns)


async def range_rows(client: PromClient, queries: Iterable[str], start: float, end: float,
                     step: float, group: tuple[str, ...], window_s: float,
                     layouts: Layouts | None = None
                     ) -> tuple[list[tuple[float, list[EngineRow]]], list[str]]:
    """The rows at each time of one range query per query in ``queries`` (``start`` to
    ``end`` every ``step``), oldest first, rebuilt per timestamp by the instant row builder
    (rates over ``window_s``; ``layouts``: as ``build_rows``), and the answers' warnings (a
    partial answer says so). Rows carry no states. Raises ``PromError``."""
    answers = await asyncio.gather(*(client.query_range(q, start, end, step)
                                     for q in queries))
    warnings = [w for res in answers for w in res.warnings]  # a partial answer has one
    by_time: dict[float, list[dict[str, Any]]] = {}
    for res in answers:
        for series in res.result:
            metric = series.get("metric") or {}
            for ts, v in series.get("values") or ():
                by_time.setdefault(float(ts), []).append(
                    {"metric": dict(metric), "value": [ts, v]})
    out: list[tuple[float, list[EngineRow]]] = []
    for ts in sorted(by_time):
        rows, _ = build_rows(split_groups([by_time.pop(ts)], group), group, window_s, layouts)
        out.append((ts, rows))
    return out, warnings


async def row_windows(mon: FleetMonitor, key: str, windows: Iterable[float]
                      ) -> Windows:
    """Row ``key`` of the latest snapshot at other rate windows (the detail screen's
    10 s / 1 m / 5 m), at that snapshot's own evaluation time: instant queries pinned to
    the row's group labels and engine: its counters and buckets per window (a union
    split only past ``MAX_QUERY_CHARS``), no gauges (they have no window: the fleet row
    has them, so the rows here leave them None). The fleet window is the snapshot's own
    row (asked too when the plan leaves detail-only buckets out: ``detail_only``); a
    window with a ``window_note`` (``rate()`` gives nothing) is None, as is every asked
    window when a query fails. A window whose row came from a partial answer (its own
    queries', or the refresh's for the fleet window's row) is in ``.partial`` with the
    backend's warnings. Never raises."""
    ws = list(dict.fromkeys(float(w) for w in windows))
    out = Windows(dict.fromkeys(ws))
    snap, plan = mon._last, mon.plan
    top, row = locate(snap.engines if snap else [], key)
    if snap is None or plan is None or top is None or row is None or top.labels is None:
        return out
    ask = []
    for w in ws:
        own = abs(w - mon.window_s) < 1e-6
        if own:
            out[w] = row
            if mon.partial:
                out.mark(w, _refresh_warnings(mon))
        if (own and plan.detail_only) or (
                not own and mon.window_note(w) is None):
            ask.append(w)
    if not ask:
        return out
    jobs: list[tuple[float, str]] = []
    for w in ask:
        jobs += [(w, q) for role, q in _pinned(plan, top, w).queries().items()
                 if role.split("#")[0] in ("counters", "buckets")]
    try:
        answers = await asyncio.gather(*(mon.client.query(q, snap.time) for _, q in jobs))
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
