"""Per-target history, target states, rows, sparkline series and the event log.

``Store.ingest`` takes every ``RawScrape`` (live or replayed), detects the engine, normalizes
the body and keeps ``(t_mono, t_wall, EngineSample)`` per target; ``snapshot`` derives rows
over a window on demand; ``commit`` (once per tick) appends sparkline values and emits
events. The store never reads a clock for derived values: live and replay share every
number. It never prints and never calls the UI.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from llmtop.capacity import annotate_rows, load_profiles
from llmtop.config import Config, Target
from llmtop.errors import ConfigError
from llmtop.gpu.reasons import unavailable_line
from llmtop.history.derive import restart_reason
from llmtop.history.logs import LOG_LINES_DEFAULT, LogBook, state_text
from llmtop.history.parsing import (
    Detector,
    Normalizer,
    ParsedScrape,
    default_detect,
    default_normalize,
    parse_body,
)
from llmtop.history.request_window import RequestWindow, ingest_body
from llmtop.history.routers import RouterBook, is_router
from llmtop.history.rows import (
    Entry,
    clean_gpu,
    clean_sample,
    fill_ratios,
    series_value,
    share_with,
)
from llmtop.history.series import EventLog, SeriesBook, tail
from llmtop.history.sidepolls import ingest_side
from llmtop.history.target import TargetHistory, identity_version, state_word, target_rows
from llmtop.model import (
    GOOD_STATES,
    SCRAPE_METRICS,
    EngineRow,
    EngineSample,
    Event,
    GpuRecord,
    GpuSample,
    RawLog,
    RawScrape,
    RawSpans,
    Snapshot,
)
from llmtop.model.stack import RouterRow
from llmtop.parse.exposition import Family
from llmtop.topology.link import link_stack

__all__ = ["GPU_SERIES_FIELDS", "SERIES_FIELDS", "WINDOWS", "Store", "gpu_series_values"]

WINDOWS: dict[str, float] = {"10s": 10.0, "1m": 60.0, "5m": 300.0}
"""Named windows; lifetime values are in ``EngineRow.lifetime``."""

SERIES_FIELDS = ("ttft_p50", "ttft_p95", "itl_p95", "gen_tps", "prompt_tps", "req_s",
                 "running", "waiting", "kv", "preempt_s")
"""Per-row sparkline series, computed over the 10 s window at each commit."""

GPU_SERIES_FIELDS = ("util", "mem_used", "power", "temp", "sm_active", "dram_active")


def gpu_series_values(g: GpuRecord) -> dict[str, float | int | None]:
    """One GPU's values for its kept series (``GPU_SERIES_FIELDS``): the store's and fleet
    mode's rings read the record the same way."""
    return {"util": g.util, "mem_used": g.mem_used_bytes, "power": g.power_w,
            "temp": g.temp_c, "sm_active": g.sm_active, "dram_active": g.dram_active}
"""Per-GPU sparkline series (``host:index`` keys)."""

SERIES_WINDOW_S = 10.0
MAX_SERIES_POINTS = 7200
FASTEST_INTERVAL_S = 0.25
"""The shortest refresh interval the UI offers (``ui.state.INTERVALS``)."""
MAX_EVENTS = 500

class Store:
    """Per-target history and everything derived from it (see ``docs/ARCHITECTURE.md``)."""

    def __init__(
        self,
        config: Config,
        *,
        normalize: Normalizer | None = None,
        detect: Detector | None = None,
    ) -> None:
        self.config = config
        self.interval_s = max(0.05, float(config.interval_s))
        self.keep_s = max(float(config.history_s), 300.0)
        self._normalize = normalize or default_normalize
        self._detect = detect or default_detect
        self._targets: dict[str, TargetHistory] = {}
        self._hosts = {t.name: t.host for t in config.targets}
        self._engine_hints = {t.name: t.engine for t in config.targets if t.engine}
        for t in config.targets:
            self._target(t.name)
        self._gpu: GpuSample | None = None
        self._now_mono: float | None = None
        self._now_wall: float | None = None
        self._log = EventLog(MAX_EVENTS)
        self.events: deque[Event] = self._log.events
        """The event log, oldest first (bounded, deduplicated)."""
        # enough points for keep_s at the fastest refresh the UI's "-" key reaches
        fastest = min(self.interval_s, FASTEST_INTERVAL_S)
        n = min(MAX_SERIES_POINTS, max(60, math.ceil(self.keep_s / fastest)))
        self._series = SeriesBook(n)
        self._gpu_series = SeriesBook(n)
        self._prev_gpu_error: str | None = None
        self._gen = 0
        self._cache: tuple[tuple[Any, ...], Snapshot] | None = None
        self._over: tuple[tuple[Any, ...], tuple[list[EngineRow], list[RouterRow]]] | None = None
        self.commit_hooks: list[Callable[[Snapshot, float, float], None]] = []
        """Called at the end of each ``commit`` with (10 s snapshot, t_mono, t_wall): the
        diagnosis (``llmtop.diagnose.live.attach``) runs there; the store imports no layer
        above it."""
        self.diagnoser: Any = None
        """The ``diagnose.live.LiveDiagnosis`` attached to this store, if any."""
        try:
            self.profiles = load_profiles(config.capacity_file)
        except ConfigError:  # the command line checked --capacity; a vanished file: none
            self.profiles = []
        """Capacity profiles the rows are matched to (``llmtop.capacity``)."""
        self._urls = {t.name: t.base_url for t in config.targets}
        for t in config.targets:
            self.learn(t)
        self.requests = RequestWindow()
        """Single requests from the engines' spans, in-flight ones, cold starts."""
        self.routers = RouterBook()
        """The routers' roles per backend, rows and backend URLs (``history.routers``)."""
        # Config.log_lines comes with the log follower's options; until then the default
        self.logs = LogBook(getattr(config, "log_lines", None) or LOG_LINES_DEFAULT)
        """Each engine's kept log events, counts and explaining line (``history.logs``)."""

    # ------------------------------------------------------------------ targets

    def _target(self, name: str, url: str | None = None) -> TargetHistory:
        ts = self._targets.get(name)
        if ts is None:
            host = self._hosts.get(name)
            if host is None:
                host = (urlsplit(url).hostname if url else None) or ""
            ts = TargetHistory(name=name, host=host)
            if url:
                self._urls.setdefault(name, url)
            hint = self._engine_hints.get(name)
            if hint:
                ts.engine, ts.hinted = hint, True
            self._targets[name] = ts
        return ts

    def learn(self, target: Target) -> None:
        """Keep what discovery knows of a target that the rows show (its container, pod or
        namespace); the monitor calls it for each engine a later search adds."""
        if target.container is not None:
            self._target(target.name, target.base_url).container = target.container
            self._urls[target.name] = target.base_url  # a pod back at a new address

    def history_of(self, name: str) -> TargetHistory | None:
        """The kept history of a target; None when the store does not know it."""
        return self._targets.get(name)

    def forget(self, name: str) -> None:
        """Drop a target no longer watched (a router backend no router names): its history,
        row and sparklines go; the event log keeps what was said."""
        self._gen += 1
        for book in (self._targets, self._urls, self._hosts, self._engine_hints):
            book.pop(name, None)
        self.logs.forget(name)
        self._series.forget(f"{name}|")

    def targets(self) -> list[str]:
        """Target names in order of first appearance (config order first)."""
        return list(self._targets)

    def needs_identity(self, target: str) -> bool:
        """True until identity has been attached after the first contact or a restart."""
        ts = self._targets.get(target)
        return ts is None or ts.wants_identity

    def engine_of(self, target: str) -> str | None:
        """The engine id a target was detected (or hinted) as; None while unknown."""
        ts = self._targets.get(target)
        return ts.engine if ts is not None else None

    def latest_sample(self, target: str) -> EngineSample | None:
        """The newest good ``EngineSample`` of a target (cache config, extra, ...)."""
        ts = self._targets.get(target)
        if ts is None or not ts.recent:
            return None
        return ts.recent[-1].sample

    @property
    def now_mono(self) -> float | None:
        """The newest monotonic time ingested or committed (None before any)."""
        return self._now_mono

    @property
    def now_wall(self) -> float | None:
        """The wall-clock time that goes with ``now_mono``."""
        return self._now_wall

    def sample_span_s(self) -> float | None:
        """Median over targets of the seconds between their oldest and newest kept good
        sample of the current process; None when no target has two. ``--once`` reports this
        as ``window_s``: with one target, rate x window_s is exactly the counter delta."""
        spans = []
        for ts in self._targets.values():
            if len(ts.recent) >= 2 and ts.recent[0].epoch == ts.recent[-1].epoch:
                spans.append(ts.recent[-1].t_mono - ts.recent[0].t_mono)
        if not spans:
            return None
        spans.sort()
        mid = len(spans) // 2
        return spans[mid] if len(spans) % 2 else (spans[mid - 1] + spans[mid]) / 2

    def once_snapshot(self, fallback_window_s: float) -> Snapshot:
        """The ``--once`` snapshot of a store fed with two ticks: the window is
        ``sample_span_s()`` (else ``fallback_window_s``, e.g. the time between the ticks),
        rounded to ms. Live ``--once`` and ``replay --once`` both call this, so they print
        identical numbers."""
        span = self.sample_span_s()
        window = span if span is not None and span > 0 else max(0.0, fallback_window_s)
        return self.snapshot(round(window, 3))

    def note_time(self, t_mono: float, t_wall: float) -> None:
        """Move the store's now (``now_mono``/``now_wall``) to a later input's time."""
        if self._now_mono is None or t_mono >= self._now_mono:
            self._now_mono, self._now_wall = t_mono, t_wall

    # ------------------------------------------------------------------ ingest

    def parse_raw(self, raw: RawScrape) -> ParsedScrape | None:
        """The parse step of ``ingest`` alone: mutates nothing, so the monitor can run it in a
        worker thread for a large body and pass the result to ``ingest(raw, parsed)``.
        None when the scrape carries no body to parse."""
        if raw.status != "ok" or raw.body is None:
            return None
        ts = self._targets.get(raw.target)
        engine, hinted = (ts.engine, ts.hinted) if ts is not None else (None, False)
        identity = dict(raw.identity) if raw.identity else (ts.identity if ts else None)
        host = ts.host if ts is not None else ""
        if raw.engine_hint and not hinted and engine is None:
            engine = raw.engine_hint
        return parse_body(self._normalize, self._detect, engine, hinted, identity, host, raw)

    def ingest(self, raw: RawScrape, parsed: ParsedScrape | None = None) -> None:
        """Parse and keep one scrape. Never raises for bad input (it becomes a state).
        ``parsed`` is ``parse_raw(raw)`` computed beforehand (e.g. in a thread)."""
        self._gen += 1
        if raw.kind != SCRAPE_METRICS:  # a side poll (``history.sidepolls``), not metrics
            ingest_side(self, raw)
            return
        ts = self._target(raw.target, raw.url)
        self.note_time(raw.t_mono, raw.t_wall)
        ts.last_raw_mono = raw.t_mono
        if raw.identity:
            ts.identity = dict(raw.identity)
            ts.wants_identity = False
        if raw.engine_hint and not ts.hinted and ts.engine is None:
            # inferred from identity endpoints, not given by the user: a payload the engine's
            # adapter cannot read is re-detected (another engine may serve the port now)
            ts.engine = raw.engine_hint
        if raw.status != "ok" or raw.body is None:
            ts.set_status(raw.status if raw.status != "ok" else "bad_payload",
                          raw.error or ("empty body" if raw.status == "ok" else None),
                          raw.http_status)
            return
        if parsed is None:
            parsed = parse_body(self._normalize, self._detect, ts.engine, ts.hinted,
                                ts.identity, ts.host, raw)
        sample, err, engine = parsed
        if sample is None:
            ts.set_status("bad_payload", err, raw.http_status)
            return
        ts.engine = engine
        self._keep(ts, raw, clean_sample(sample))

    def _keep(self, ts: TargetHistory, raw: RawScrape, sample: EngineSample) -> None:
        prev = ts.recent[-1].sample if ts.recent else None
        share_with(prev, sample)
        if prev is not None:
            reason = restart_reason(prev, sample)
            if reason is not None:
                ts.epoch += 1
                ts.restart_mono = raw.t_mono
                self.logs.restarted(ts.name, ts.recent[-1].t_wall, raw.t_wall)
                ts.wants_identity = True
                self.event("warn", ts.name, f"RESTARTED ({reason})", t_wall=raw.t_wall)
        if not ts.seen:
            ts.seen = True
            version = sample.version or identity_version(ts.identity)
            what = f"{sample.engine} {version}" if version else sample.engine
            self.event("info", ts.name, f"first seen: detected as {what}", t_wall=raw.t_wall)
        ts.version = sample.version or identity_version(ts.identity) or ts.version
        for m in sample.models:
            ts.models.setdefault(m.model, None)
        ts.recent.append(Entry(raw.t_mono, raw.t_wall, sample, ts.epoch))
        ts.trim(raw.t_mono, self.keep_s)
        ts.bodies.append((raw.t_mono, raw.body or ""))
        ts.fam_cache = {k: v for k, v in ts.fam_cache.items() if any(k == b[0]
                                                                     for b in ts.bodies)}
        ts.set_status("ok", None, raw.http_status)
        ts.last_ok_mono = raw.t_mono

    def ingest_spans(self, raw: RawSpans) -> None:
        """One OTLP trace body into the request window, each request matched to its
        target (``history.request_window``). Never raises for bad input (it is counted)."""
        self._gen += 1
        self.note_time(raw.t_mono, raw.t_wall)
        targets = [(ts.name, ts.host, ts.engine) for ts in self._targets.values()]
        ingest_body(self.requests, raw, targets)

    def add_log(self, raw: RawLog) -> None:
        """Keep what a log follower read for one target (``history.logs``): its events,
        drops, location and read error. Never raises for bad input."""
        self._gen += 1
        self.note_time(raw.t_mono, raw.t_wall)
        self.logs.add(raw)

    def seen(self, target: str, t_wall: float) -> None:
        """The operator opened ``target``'s log at ``t_wall``: its errors until then are no
        longer counted as new (``LogSummary.new_errors``)."""
        self._gen += 1
        self.logs.seen(target, t_wall)

    def ingest_gpus(self, sample: GpuSample) -> None:
        """Keep the latest GPU sample (NVML, demo, or its error)."""
        self._gen += 1
        for g in sample.gpus:
            clean_gpu(g)
        self._gpu = sample
        self.note_time(sample.t_mono, sample.t_wall)

    # ------------------------------------------------------------------ rows

    def _gpus(self) -> list[GpuRecord]:
        out: list[GpuRecord] = []
        seen: set[object] = set()
        sources = [self._gpu.gpus] if self._gpu is not None else []
        sources += [ts.recent[-1].sample.gpus for ts in self._targets.values() if ts.recent]
        for gpus in sources:
            for g in gpus:
                # the same GPU seen twice (NVML and Triton's nv_gpu_*): keep the first
                k: object = g.uuid or (g.host, g.index, g.source)
                if k not in seen:
                    seen.add(k)
                    out.append(g)
        return out

    def snapshot(
        self, window_s: float, t_mono: float | None = None, t_wall: float | None = None
    ) -> Snapshot:
        """Rows of every target x model over ``window_s`` ending at ``t_mono`` (default: the
        newest time ingested or committed), GPUs and the GPU error."""
        t = t_mono if t_mono is not None else (self._now_mono or 0.0)
        tw = t_wall if t_wall is not None else (self._now_wall or 0.0)
        key = (window_s, t, tw, self._gen)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        engines = self._rows(window_s, t, tw)
        routers = self.router_rows(window_s, t)
        link_stack(engines, routers, self._urls)
        snap = Snapshot(
            time=tw,
            window_s=window_s,
            engines=engines,
            gpus=self._gpus(),
            gpu_error=self._gpu.error if self._gpu is not None else None,
            routers=routers,
            log_events=self.logs.events(),
        )
        if self.requests.active:
            snap.requests, snap.requests_window = self.requests.snapshot(window_s, tw)
        self._cache = (key, snap)
        return snap

    def row(self, key: str, window_s: float, t_mono: float | None = None) -> EngineRow | None:
        """One row (``target|model`` or ``target|model|rank``) over another window, for the
        engine detail (10 s / 1 min / 5 min columns). None when unknown."""
        target = key.split("|", 1)[0]
        ts = self._targets.get(target)
        if ts is None:
            return None
        t = t_mono if t_mono is not None else (self._now_mono or 0.0)
        rows = target_rows(ts, window_s, t, self.interval_s)
        self._add_logs(ts, rows, window_s, self._now_wall or 0.0)
        fill_ratios(rows, self._gpus(), self.config.gpu_peak)
        annotate_rows(rows, self.profiles, self._now_wall or 0.0, urls=self._urls)
        if self._cache is not None:  # router and role as the latest snapshot linked them
            linked = {e.key: e for e in self._cache[1].engines}
            for r in rows:
                if (e := linked.get(r.key)) is not None:
                    r.router, r.role = e.router, e.role
        for r in rows:
            if r.key == key:
                return r
            for rr in r.ranks:
                if rr.key == key:
                    return rr
        return None

    # ------------------------------------------------------------------ commit

    def commit(self, t_mono: float, t_wall: float) -> Snapshot:
        """End of a tick: append sparkline values (10 s window), emit state-change events.
        Returns the 10 s snapshot it computed (also cached for ``snapshot``)."""
        self.note_time(t_mono, t_wall)
        self.requests.trim(t_wall)
        snap = self.snapshot(SERIES_WINDOW_S, t_mono, t_wall)
        values: dict[tuple[str, str], float | None] = {}
        for row in snap.engines:
            live = row.state in GOOD_STATES
            for r in (row, *row.ranks):
                for f in SERIES_FIELDS:
                    values[(r.key, f)] = series_value(r, f) if live else None
        self._series.commit(t_wall, values)
        values = {}
        for g in snap.gpus:
            gk = f"{g.host}:{g.index}"
            vals = gpu_series_values(g)
            for f in GPU_SERIES_FIELDS:
                v = vals[f]
                values.setdefault((gk, f), None if v is None else float(v))
        self._gpu_series.commit(t_wall, values)
        self._state_events(snap, t_wall)
        for hook in self.commit_hooks:
            hook(snap, t_mono, t_wall)
        return snap

    def _state_events(self, snap: Snapshot, t_wall: float) -> None:
        states: dict[str, EngineRow | RouterRow] = {}
        for row in (*snap.engines, *snap.routers):
            states.setdefault(row.target, row)
        for name, row in states.items():
            ts = self._targets[name]
            prev, cur = ts.prev_state, row.state
            if cur == "stale" and ts.status is None:
                continue  # not scraped yet: nothing happened, and nothing to recover from
            ts.prev_state = cur
            was_good = prev is None or prev in GOOD_STATES
            said = self._log_cause_event(ts, row, t_wall, changed=prev != cur)
            if cur in GOOD_STATES:
                if not was_good:
                    self.event("info", name, f"recovered (was {state_word(prev, None)})",
                               t_wall=t_wall)
                continue
            if prev == cur:
                continue
            level = "warn" if cur == "stale" else "error"
            text = state_word(cur, row.http_status)
            if cur == "stale":
                text = f"STALE: {row.error}" if said else "STALE: no fresh data"
            elif row.error:
                text = f"{text}: {row.error}"
            self.event(level, name, text, t_wall=t_wall)
        err = self._gpu.error if self._gpu is not None else None
        if err and err != self._prev_gpu_error:
            self.event("warn", None, unavailable_line(err), t_wall=t_wall)
        elif self._prev_gpu_error and not err and self._gpu is not None and self._gpu.gpus:
            self.event("info", None, "GPU readings back", t_wall=t_wall)
        self._prev_gpu_error = err

    def _log_cause_event(self, ts: TargetHistory, row: EngineRow, t_wall: float, *,
                         changed: bool) -> bool:
        """Name a bad state's explaining log line once per episode (``LogBook.to_say``):
        True when the caller's state-change line carries it (in the row's reason)."""
        last_good = ts.recent[-1].t_wall if ts.recent else None
        said = self.logs.to_say(ts.name, row.state, last_good)
        if said is None:
            return False
        if changed and row.state not in GOOD_STATES:
            return True
        self.event("error" if row.state != "restarted" else "warn", ts.name,
                   f"{state_word(row.state, row.http_status)} — {state_text(None, said)}",
                   t_wall=t_wall)
        return False

    # ------------------------------------------------------------------ for the diagnosis

    def rows_over(self, window_s: float, t_mono: float) -> list[EngineRow]:
        """Rows of every target over ``window_s`` ending at ``t_mono``, leaving the snapshot
        cache alone (the diagnosis' own window); linked to the routers over the same window
        (``routers_over``)."""
        return self._stack_over(window_s, t_mono)[0]

    def routers_over(self, window_s: float, t_mono: float) -> list[RouterRow]:
        """The router rows that go with ``rows_over`` (the same window, computed once)."""
        return self._stack_over(window_s, t_mono)[1]

    def _stack_over(self, window_s: float, t_mono: float
                    ) -> tuple[list[EngineRow], list[RouterRow]]:
        key = (window_s, t_mono, self._gen)
        if self._over is not None and self._over[0] == key:
            return self._over[1]
        rows = self._rows(window_s, t_mono, self._now_wall or 0.0)
        routers = self.router_rows(window_s, t_mono)
        link_stack(rows, routers, self._urls)
        self._over = (key, (rows, routers))
        return rows, routers

    def _rows(self, window_s: float, t_mono: float, t_wall: float) -> list[EngineRow]:
        """Rows of every target over ``window_s``, with their capacity fields."""
        rows = []
        for ts in self._targets.values():
            if not is_router(ts):
                mine = target_rows(ts, window_s, t_mono, self.interval_s)
                self._add_logs(ts, mine, window_s, t_wall)
                rows += mine
        fill_ratios(rows, self._gpus(), self.config.gpu_peak)
        annotate_rows(rows, self.profiles, t_wall, urls=self._urls)
        return rows

    def _add_logs(self, ts: TargetHistory, rows: list[EngineRow], window_s: float,
                  t_wall: float) -> None:
        """The rows' ``log``, and a bad state's explaining line in their reason."""
        last_good = ts.recent[-1].t_wall if ts.recent else None
        self.logs.annotate(ts.name, rows, window_s, t_wall, last_good)

    def router_rows(self, window_s: float, t_mono: float) -> list[RouterRow]:
        """One ``RouterRow`` per router target over ``window_s`` ending at ``t_mono``."""
        return self.routers.rows(self._targets.values(), window_s, t_mono, self.interval_s)

    def backend_urls(self) -> list[str]:
        """Every worker URL the routers name in their newest sample (for rediscovery)."""
        return self.routers.backend_urls(self._targets.values())

    def restart_ages(self, t_mono: float) -> dict[str, float]:
        """Seconds since each target's last restart seen by this store."""
        return {name: t_mono - ts.restart_mono for name, ts in self._targets.items()
                if ts.restart_mono is not None and t_mono >= ts.restart_mono}

    # ------------------------------------------------------------------ public views

    def event(self, level: str, target: str | None, text: str, *,
              t_wall: float | None = None) -> None:
        """Append an event-log line unless it repeats the last text for the same target.

        ``t_wall`` defaults to the newest time the store has seen (replay time in replay).
        """
        if t_wall is None:
            t_wall = self._now_wall
            if t_wall is None:
                import time

                t_wall = time.time()
        self._log.add(t_wall, level, target, text)

    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        """Sparkline values of a row (``SERIES_FIELDS``), one per commit, None = gap; the
        newest ``last`` only when given (a caller drawing 60 cells need not copy 3,600)."""
        return self._series.get(key, field, last)

    def gpu_series(self, gpu_key: str, field: str, last: int | None = None
                   ) -> list[float | None]:
        """Sparkline values of a GPU (``host:index``, ``GPU_SERIES_FIELDS``), one per commit
        like ``series`` (the same count and times); the newest ``last`` only when given.

        ``host#index`` is accepted too (the UI's GPU key).
        """
        if "#" in gpu_key:
            host, _, index = gpu_key.rpartition("#")
            gpu_key = f"{host}:{index}"
        return self._gpu_series.get(gpu_key, field, last)

    def series_times(self, last: int | None = None) -> list[float]:
        """Wall-clock time of each commit; series are aligned to the end of this list. The
        newest ``last`` only when given."""
        return tail(self._series.times, last)

    def series_count(self) -> int:
        """Commits so far: only grows (the bounded series drop old points, this does not), so
        the newest series point is at absolute position ``series_count() - 1``. Sparklines
        align their cells to it, so that cells do not shift as points arrive."""
        return self._series.commits

    def raw_families(self, target: str) -> tuple[dict[str, Family], dict[str, Family], float]:
        """Fully parsed families of the last two good bodies, and the seconds between them.

        Parsed lazily and cached; a body that is not Prometheus text (JSON) gives ``{}``.
        """
        ts = self._targets.get(target)
        if ts is None or not ts.bodies:
            return {}, {}, 0.0
        parsed = [ts.families(t, body) for t, body in ts.bodies]
        if len(parsed) == 1:
            return parsed[0], {}, 0.0
        return parsed[1], parsed[0], ts.bodies[1][0] - ts.bodies[0][0]
