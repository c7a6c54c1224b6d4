"""``FleetMonitor``: one refresh = a fixed set of instant queries at one aligned time.

It has the shape of ``llmtop.monitor.Monitor`` (``tick() -> Snapshot``, ``snapshot()``,
``aclose()``), so the TUI's ``MonitorSource`` and ``--once`` use it unchanged. Connect-time
work (backend, scrape interval, metric names, grouping) is redone every ``REDISCOVER_S``.
At most one refresh is in flight: a second ``tick`` while one runs waits for that one.
A failure is never raised: it becomes ``error`` (a ``PromError``) and an empty snapshot (or,
live, the last good one). ``history`` backfills one row's sparklines with range queries.
After the first good refresh, and after each ``travel``, the diagnosis' baseline is warmed
from the server's own history (``llmtop.fleet.warm``) in the background: the refresh is shown
at once, the findings change when the warm-up lands (``warmed`` waits for it: ``--once``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from llmtop.capacity import annotate_rows, annotate_totals, load_profiles
from llmtop.config import Config, PrometheusConfig
from llmtop.errors import ConfigError
from llmtop.fleet import pinned
from llmtop.fleet.diagnosis import FleetDiagnosis
from llmtop.fleet.gpulink import link_gpus
from llmtop.fleet.queries import (
    BUCKET_PARTS,
    ENGINE_LABELS,
    Layouts,
    Plan,
    align,
    classify,
    detail_only_names,
    discovery_query,
    engine_of,
    jobs_query,
    layout_query,
    names_selectors,
    parse_duration,
    parse_match,
    read_layouts,
    rule_names,
)
from llmtop.fleet.record import (
    fleet_error_record,
    fleet_record,
    refresh_base,
    role_of,
    warm_record,
)
from llmtop.fleet.rows import build_rows, gpu_records, model_totals, split_groups
from llmtop.fleet.stack import fleet_stack
from llmtop.fleet.states import StateInfo, apply_states, down_errors, read_state
from llmtop.fleet.warm import Warmup, fetch, warm
from llmtop.history.rows import fill_ratios
from llmtop.model import EngineRow, Snapshot
from llmtop.parse import vllm as _vllm_names
from llmtop.sources.prometheus import (
    Backend,
    PromClient,
    PromError,
    PromResult,
    gc_paused,
    parse_value,
)

__all__ = ["ERRORS_TTL_S", "REDISCOVER_S", "FleetMonitor"]

REDISCOVER_S = 300.0
"""Connect-time work (names, interval) is redone this often: discovery touches every engine
series once, so not every refresh."""
ERRORS_TTL_S = 30.0
"""Down targets' scrape errors are asked again after this long (or when the set changes)."""
VM_LATENCY_OFFSET_S = 30.0
"""VictoriaMetrics hides samples younger than this by default (``-search.latencyOffset``)."""

_WANT: dict[str, Callable[[str], bool] | None] = {"vllm": _vllm_names.want}


_HISTS: dict[str, frozenset[str] | None] = {}


def _hist_families(engine: str) -> frozenset[str] | None:
    """Every histogram family name an adapter maps to a ``HIST_KEYS`` key (None: no table)."""
    if engine not in _HISTS:
        import importlib

        table = getattr(importlib.import_module(f"llmtop.parse.{engine}"), "HIST_FAMILIES", None)
        _HISTS[engine] = None if table is None else frozenset(
            n for names in table.values() for n in names)
    return _HISTS[engine]


def _wanted(name: str, engine: str) -> bool:
    """Adapters with a ``want`` list read only those names; others read their whole prefix."""
    if engine not in _WANT:
        import importlib

        _WANT[engine] = getattr(importlib.import_module(f"llmtop.parse.{engine}"), "want", None)
    fn = _WANT.get(engine)
    if fn is None:
        return True
    if name.endswith("_bucket"):  # only the histograms the adapter maps (its HIST_FAMILIES)
        hists = _hist_families(engine)
        if hists is not None:
            return name[:-7] in hists
    base = name
    for sfx in ("_bucket", "_sum", "_count", "_total"):
        if base.endswith(sfx):
            base = base[: -len(sfx)]
            break
    return fn(base) or fn(name)


class FleetMonitor:
    """Rows for every instance of every model, from a Prometheus-compatible server."""

    def __init__(self, config: Config, *, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.time, lean: bool = False) -> None:
        assert config.prometheus is not None
        self.config = config
        self.lean = lean
        """Leave the ``queries.DETAIL_HISTS`` buckets out of each refresh (the TUI, not
        recording)."""
        self.cfg: PrometheusConfig = config.prometheus
        self.client = PromClient(self.cfg, transport=transport)
        self._transport = transport
        self.clock = clock
        self.backend: Backend | None = None
        self.plan: Plan | None = None
        self.scrape_interval_s: float = self.cfg.scrape_interval_s
        self.interval_from: str = "config"
        self.error: PromError | None = None
        self.warnings: list[str] = []
        self.partial = False
        self.eval_time: float | None = None
        self.at: float | None = self.cfg.at
        self.totals: list[EngineRow] = []
        try:
            self.profiles = load_profiles(config.capacity_file)
        except ConfigError:  # the command line checked --capacity; a vanished file: none
            self.profiles = []
        self.queries_last: int = 0
        self._targets: list[dict[str, Any]] = []
        self._connected_at: float | None = None
        self._last: Snapshot | None = None
        self._last_good: Snapshot | None = None
        self._connect_warnings: list[str] = []
        self._inflight: asyncio.Task[Snapshot] | None = None
        self._errors: tuple[frozenset[Any], float, dict[tuple[str, ...], str]] | None = None
        self._refreshed_at: float | None = None
        self.store = None
        self.diagnoser = FleetDiagnosis()
        """The live diagnosis, fed by each new refresh (``findings``, ``take_events``)."""
        self.sink: Callable[[dict[str, Any]], None] | None = None
        """Given each refresh's raw answers as a recording record (``--record``)."""
        self.warm_baseline = True
        """Warm the diagnosis' baseline from the server's history (``llmtop.fleet.warm``)."""
        self.warmup: Warmup | None = None
        """The last warm-up's ``Warmup`` (None: none landed yet)."""
        self._warm_due = True
        self._warm_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ properties

    @property
    def display_url(self) -> str:
        return self.client.display_url

    @property
    def window_s(self) -> float:
        if self.cfg.window_s is not None:
            return self.cfg.window_s
        return max(4 * self.scrape_interval_s, 60.0)

    @property
    def refresh_s(self) -> float:
        return max(self.cfg.refresh_s or 10.0, self.scrape_interval_s)

    @property
    def live(self) -> bool:
        return self.at is None

    def source_json(self) -> dict[str, Any]:
        b = self.backend
        return {"kind": b.kind if b else None, "url": self.display_url,
                "version": b.version if b else None}

    def header_text(self) -> str:
        """``prometheus http://h:9090 · window 60s · LIVE`` (or ``AT 03:12:00``), then
        ``PARTIAL`` and the error state when there is one. No credentials."""
        kind = self.backend.kind if self.backend else "prometheus"
        parts = [f"{kind} {self.display_url}", f"window {self.window_s:g}s"]
        if self.live:
            parts.append("LIVE")
        else:
            t = self.eval_time if self.eval_time is not None else self.at
            parts.append("AT " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t or 0)))
        if self.partial:
            parts.append("PARTIAL")
        if self.error is not None:
            parts.append(f"{self.error.kind.upper()}: {self.error.message}")
        return " · ".join(parts)

    def window_note(self, window_s: float) -> str | None:
        """Why a rate window other than the fleet's gives no row (None: it can): one under
        2 x the scrape interval holds fewer than two samples."""
        if window_s < 2 * self.scrape_interval_s:
            return (f"{window_s:g} s < 2 \u00d7 scrape interval {self.scrape_interval_s:g} s: "
                    "rate() needs two samples")
        return None

    def travel(self, at: float | None) -> None:
        """Evaluate at ``at`` from the next refresh on (None: live again)."""
        self.at = at
        self._connected_at = None
        self._refreshed_at = None
        self._last_good = None
        self.diagnoser.reset()  # another time's rows are not judged against this baseline
        if self._warm_task is not None:
            self._warm_task.cancel()  # its history is of the time travelled away from
        self._warm_due = True  # the new time's baseline comes from the history before it
        self.warmup = None

    # ------------------------------------------------------------------ time

    def eval_time_now(self) -> float:
        if self.at is not None:
            return round(self.at, 3)
        now = self.clock()
        if self.backend is not None and self.backend.kind == "victoriametrics":
            given = [parse_duration(v) for k, v in self.cfg.params if k == "latency_offset"]
            now -= given[0] if given and given[0] is not None else VM_LATENCY_OFFSET_S
        return align(now, self.scrape_interval_s)

    # ------------------------------------------------------------------ connect

    def _matchers(self) -> tuple[list[str], list[str]]:
        parsed = parse_match(self.cfg.match)
        if parsed is None:  # unreadable: send as written, the server says what is wrong
            raw = self.cfg.match.strip().strip("{}") if self.cfg.match else ""
            return [raw, 'server=""'], [raw]
        f = [m.text() for m in parsed] + ['server=""']
        ft = [m.text() for m in parsed if m.label not in ENGINE_LABELS]
        return f, ft

    async def connect(self) -> None:
        """Backend, scrape interval, present metric names and the grouping."""
        self.backend = await self.client.detect()
        warn: list[str] = []
        try:
            body = await self.client.get("/api/v1/targets", {"state": "active"})
            data = body.get("data") or {}
            self._targets = list(data.get("activeTargets") or [])
        except PromError as exc:
            if exc.kind in ("unreachable", "unauthorized"):
                raise
            self._targets = []
            warn.append(f"no /api/v1/targets ({exc.message}); scrape interval "
                        f"{self.cfg.scrape_interval_s:g} s from config")
        self._set_interval(set(), [])  # first guess (all targets) for the discovery time
        f, ft = self._matchers()
        found = await self._discover(f, self.eval_time_now())
        names: dict[str, str] = {}
        jobs: set[str] = set()
        has_pod = False
        types = await self._metadata_types()
        present = {(it.get("metric") or {}).get("__name__", "") for it in found}
        bucket_bases = {n[:-7] for n in present if n.endswith("_bucket")}
        for item in found:
            metric = item.get("metric") or {}
            if metric.get("llmtop_name") == "has_pod":
                has_pod = parse_value((item.get("value") or [0, "0"])[1]) > 0
                continue
            name = metric.get("__name__", "")
            engine = engine_of(name)
            if engine is None:
                continue
            if engine == "dcgm":
                names[name] = "dcgm"
                continue
            if not _wanted(name, engine):
                continue
            kind = classify(name, types, bucket_bases)
            if kind != "skip":
                names[name] = kind
                if metric.get("job"):
                    jobs.add(metric["job"])
        self._set_interval(jobs, warn)
        engines = tuple(sorted({e for n in names if (e := engine_of(n)) not in (None, "dcgm")}))
        if self.cfg.group_by:
            group = tuple(self.cfg.group_by)
        else:
            group = ("namespace", "pod") if has_pod else ("instance",)
        parsed = parse_match(self.cfg.match)
        used = [*group, *(m.label for m in parsed)] if parsed is not None else ["?"]
        rates = [n for n, k in names.items() if k in ("counter", "bucket")]
        self.plan = Plan(group=group, window_s=self.window_s, matchers=f, target_matchers=ft,
                         names=names, engines=engines,
                         lookback_s=max(600.0, 2 * self.window_s),
                         rules=rule_names(present, rates, self.window_s, used),
                         layouts=await self._layouts(names, f), bucket_parts=BUCKET_PARTS,
                         detail_only=detail_only_names(names) if self.lean
                         else frozenset())
        self._connect_warnings = warn
        self._connected_at = self.clock()

    async def _discover(self, f: list[str], t: float) -> list[dict[str, Any]]:
        """Answer-shaped items (``metric``: ``__name__`` and ``job``, or the ``has_pod``
        tag): the names from the label-values API (the server reads its index, not the
        samples of every engine series) and the jobs/pods from one series per instance;
        a server without that API gets the query that counts every engine series."""
        try:
            body = await self.client.get("/api/v1/label/__name__/values", {
                "match[]": names_selectors(f), "start": f"{t - 300:.3f}", "end": f"{t:.3f}"})
            listed = body.get("data")
            if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
                raise PromError("bad_payload", "label values: not a list of names")
        except PromError as exc:
            if exc.kind in ("unreachable", "unauthorized"):
                raise
            return (await self.client.query(discovery_query(f), t)).result
        res = await self.client.query(jobs_query(f), t)
        return [*({"metric": {"__name__": n}} for n in listed), *res.result]

    async def _layouts(self, names: dict[str, str], f: list[str]) -> Layouts:
        """Bucket name -> its bounds, for the names whose series all share them (asked then
        only below their count: ``Plan.filtered``); none when the server cannot say."""
        buckets = [n for n, k in names.items() if k == "bucket"]
        if not buckets:
            return Layouts()
        try:
            res = await self.client.query(layout_query(buckets, f), self.eval_time_now())
        except PromError as exc:
            if exc.kind in ("unreachable", "unauthorized"):
                raise
            return Layouts()  # every bucket asked whole: slower, the same numbers
        return Layouts(read_layouts(res.result))

    async def _metadata_types(self) -> dict[str, str]:
        """Metric name -> type from the server's metadata ({} when it keeps none, as
        VictoriaMetrics by default); a counter also under its ``_total`` name."""
        try:
            body = await self.client.get("/api/v1/metadata")
        except PromError:
            return {}
        data = body.get("data")
        out: dict[str, str] = {}
        if isinstance(data, dict):
            for name, entries in data.items():
                types = {e.get("type") for e in entries if isinstance(e, dict)} \
                    if isinstance(entries, list) else set()
                if len(types) == 1:
                    kind = str(next(iter(types)))
                    out[name] = kind
                    if kind == "counter":
                        out[name + "_total"] = kind
        return out

    def _set_interval(self, jobs: set[str], warn: list[str]) -> None:
        found = []
        for tg in self._targets:
            labels = tg.get("labels") or {}
            if jobs and labels.get("job") not in jobs:
                continue
            v = parse_duration(str(tg.get("scrapeInterval") or (
                tg.get("discoveredLabels") or {}).get("__scrape_interval__") or ""))
            if v:
                found.append(v)
        if found:
            self.scrape_interval_s = max(found)
            self.interval_from = "targets"
        else:
            self.scrape_interval_s = self.cfg.scrape_interval_s
            self.interval_from = "config"
            if self._targets:
                warn.append("scrape interval not found in /api/v1/targets; "
                            f"{self.cfg.scrape_interval_s:g} s from config")

    # ------------------------------------------------------------------ refresh

    async def tick(self, timeout_s: float | None = None) -> Snapshot:
        """One refresh (or the one already in flight)."""
        if self._inflight is not None and not self._inflight.done():
            return await asyncio.shield(self._inflight)
        if self._last is not None and self.error is None and self._refreshed_at is not None:
            if self.live and self.clock() - self._refreshed_at < self.scrape_interval_s:
                return self._last  # never faster than the scrape interval
            if not self.live and self._last.time == round(self.at or 0.0, 3):
                return self._last  # the past does not change: asked once
        self._inflight = asyncio.ensure_future(self._refresh())
        return await asyncio.shield(self._inflight)

    async def _refresh(self) -> Snapshot:
        started = self.clock()  # the pace is from refresh start to start, however long it took
        at = self.at
        self.warnings = []
        self.partial = False
        sent_before = self.client.requests
        try:
            if (self.plan is None or self._connected_at is None
                    or self.clock() - self._connected_at > REDISCOVER_S):
                await self.connect()
            t = self.eval_time_now()
            snap = await self._evaluate(t)
            self.error = None
        except PromError as exc:
            self.error = exc
            if self.sink is not None:  # a recording shows the outage as it was seen
                self.sink(fleet_error_record(self._record_base(
                    self.eval_time_now() if self.backend else self.clock()), exc))
            keep = self._last_good is not None and self.live and exc.kind in (
                "unreachable", "too_big", "http_error", "bad_payload")
            # a passing outage keeps the last good rows on screen (the header names the
            # error and the clock stays at their time), never a blank table
            snap = self._last_good if keep and self._last_good is not None else Snapshot(
                time=self.eval_time if self.eval_time is not None else self.clock(),
                window_s=self.window_s)
        else:
            self._last_good = snap
            if self.at == at:  # not travelled away meanwhile: judged once, at its own time
                warm = self._warm_due and self.warm_baseline
                if warm:
                    self._warm_due = False
                    self.diagnoser.begin_warm()
                self.diagnoser.on_refresh(snap)
                if warm:  # not awaited: the first refresh shows before the warm-up lands
                    self._warm_task = asyncio.ensure_future(self._warm(snap.time))
        self.queries_last = self.client.requests - sent_before
        self._last = snap
        self._refreshed_at = started
        return snap

    def _record_base(self, t: float) -> dict[str, Any]:
        """The fields of a recording's record at ``t`` (``record.refresh_base``)."""
        return refresh_base(t, window_s=self.window_s, scrape_interval_s=self.scrape_interval_s,
                            plan=self.plan, source=self.source_json(), warnings=self.warnings,
                            partial=self.partial)

    async def _run(self, queries: dict[str, str], t: float) -> dict[str, PromResult]:
        keys = list(queries)
        answers = await asyncio.gather(*(self.client.query(queries[k], t) for k in keys))
        out = dict(zip(keys, answers, strict=True))
        for r in answers:
            for w in r.warnings:
                if w not in self.warnings:
                    self.warnings.append(w)
            self.partial = self.partial or r.partial
        return out

    async def _evaluate(self, t: float) -> Snapshot:
        plan = self.plan
        assert plan is not None
        self.eval_time = t
        self.warnings.extend(self._connect_warnings)
        if not plan.names:
            m = f" matching {self.cfg.match}" if self.cfg.match else ""
            raise PromError("empty", f"no inference-engine metrics{m} on {self.display_url} "
                            "(is Prometheus scraping the engines? check --match)")
        # the cyclic collector stays off from the first answer to the last row: the decoded
        # answers (tens of thousands of acyclic dicts) are freed by reference counting at
        # the end, never walked by collections set off in between (they cost 10-40 ms)
        with gc_paused():
            ans = await self._run(plan.queries(), t)
            results = {k: r.result for k, r in ans.items()}
            del ans
            record = fleet_record(self._record_base(t), results) \
                if self.sink is not None else None
            info = read_state(role_of(results, "state"), plan.group)
            errors = await self._scrape_errors(info.down_labels) if info.down_labels else {}
            if record is not None and self.sink is not None:
                record["errs"] = [[list(k), v] for k, v in errors.items()]
                self.sink(record)
                del record
            snap = self.assemble(results, plan, t, info, errors)
            for items in results.values():
                # the query tasks that returned them sit in reference cycles: without this
                # the answers live on until the collector's next pass, which then walks
                # ~70k of their objects (30-50 ms at 500 instances) before freeing them
                items.clear()
            del results
        return snap

    def assemble(self, results: dict[str, list[dict[str, Any]]], plan: Plan, t: float,
                 info: StateInfo, errors: dict[tuple[str, ...], str]) -> Snapshot:
        """The snapshot of one refresh's answers (``results``: role or ``role#N`` -> answer
        series), with states; sets ``totals``. No I/O: a recording's answers replay here."""
        data = [role_of(results, "gauges"), role_of(results, "counters"),
                role_of(results, "buckets")]
        with gc_paused():  # ~125k answer series at 500 instances: no cycles among them
            groups = split_groups(data, plan.group)
            rows, samples = build_rows(groups, plan.group, self.window_s, plan.layouts)
            del groups
        if plan.layouts.stale and self.live:  # a bound the layout lacks: ask the layouts again
            self._connected_at = None
        apply_states(rows, info, errors, plan, t, 2 * self.scrape_interval_s)
        gpu_groups = split_groups([role_of(results, "gpus")], ())  # one group: every DCGM series
        gpus = gpu_records(gpu_groups[()].series) if gpu_groups else []
        link_gpus(rows, gpus)  # DCGM GPUs -> the rows they serve (by pod, or a one-engine host)
        fill_ratios(rows, gpus, self.config.gpu_peak)  # MBU/MFU: the GPUs linked just above
        self.totals = model_totals(samples.values(), self.window_s)
        gpu_type = {p.engine_target: g.name for g in gpus for p in g.processes
                    if p.engine_target and g.name}
        annotate_rows(rows, self.profiles, t, gpus=gpu_type)  # headroom (docs/capacity.md)
        annotate_totals(self.totals, rows)
        if self.partial:
            self.warnings.insert(0, "PARTIAL: some stores did not answer; values may be "
                                 "incomplete")
        routers = fleet_stack(results, plan.group, t, self.window_s, rows)
        return Snapshot(time=t, window_s=self.window_s, engines=rows, gpus=gpus, routers=routers,
                        gpu_error=None if gpus else "no DCGM exporter series")

    async def _scrape_errors(self, down: dict[tuple[str, ...], dict[str, str]]
                             ) -> dict[tuple[str, ...], str]:
        """The down groups' last scrape errors (``states.down_errors``): the whole target list
        is asked at most every ``ERRORS_TTL_S`` while the same targets stay down."""
        keys, now, cached = frozenset(down), self.clock(), self._errors
        if cached is not None and cached[0] == keys and 0 <= now - cached[1] < ERRORS_TTL_S:
            return cached[2]
        try:
            body = await self.client.get("/api/v1/targets", {"state": "active"})
        except PromError:
            return {}
        out = down_errors(body, down)
        self._errors = (keys, now, out)
        return out

    # ------------------------------------------------------------------ one row

    async def history(self, key: str, points: int = 90) -> list[tuple[float, EngineRow | None]]:
        """``pinned.history``: row ``key`` at past refresh times (sparklines)."""
        return await pinned.history(self.client, self._last, self.plan, key, self.refresh_s,
                                    points)

    async def row_windows(self, key: str, windows: Iterable[float]
                          ) -> dict[float, EngineRow | None]:
        """``pinned.row_windows``: row ``key`` at other rate windows (detail screen)."""
        return await pinned.row_windows(
            self.client, self._last, self.plan, key, windows, window_s=self.window_s,
            window_note=self.window_note,
            partial=self._refresh_warnings() if self.partial else None)

    def _refresh_warnings(self) -> list[str]:
        """The latest refresh's own query warnings: not the connect notes, not the header's
        ``PARTIAL`` line."""
        skip = set(self._connect_warnings)
        return [w for w in self.warnings if w not in skip and not w.startswith("PARTIAL:")]

    # ------------------------------------------------------------------ Monitor shape

    def snapshot(self, window_s: float | None = None) -> Snapshot | None:
        """The latest snapshot, for its own rate window only: a fleet refresh computes one
        window, so any other window (the detail screen asks 10 s, 1 m, 5 m) is unknown."""
        if window_s is not None and abs(window_s - self.window_s) > 1e-6:
            return None
        return self._last

    async def _warm(self, t: float) -> None:
        """The warm-up (``llmtop.fleet.warm``) on a client of its own: the refresh's
        request count and concurrency cap stay the refresh's. Never raises."""
        client = PromClient(self.cfg, transport=self._transport)
        try:
            got = await fetch(client, self.plan, t, self.window_s,
                              keep_answers=self.sink is not None)
            if self.sink is not None:  # a replay rebuilds this baseline from the answers
                self.sink(warm_record(
                    self._record_base(t), start=got.start, end=got.end, step_s=got.step_s,
                    queries=got.queries, answers=got.answers, warnings=got.warnings,
                    error=got.error))
                got.answers = {}
            self.warmup = warm(self.diagnoser, got)
        except Exception as exc:  # a bug in the warm-up must not stop the monitor
            if self.diagnoser.warm_failed(t):
                self.diagnoser.note(t, "warn", f"diagnosis: no baseline from the server's "
                                    f"history ({type(exc).__name__}: {exc})")
        finally:
            if self._transport is None:  # a transport given is shared: the monitor's to close
                await client.aclose()

    async def warmed(self) -> Warmup | None:
        """Wait for the warm-up in flight, if any (``--once``); the last ``Warmup``."""
        task = self._warm_task
        if task is not None and not task.done():
            await asyncio.wait([task])
        return self.warmup

    async def aclose(self) -> None:
        task = self._warm_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])
        await self.client.aclose()
