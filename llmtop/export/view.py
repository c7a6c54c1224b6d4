"""The exporter's view: one ``Snapshot`` and its findings as ``prometheus_client`` metrics.

Like ``--once --json`` it only reads rows, GPUs and findings: no engine text is parsed and no
number is derived here. A value the row does not have (``None``, NaN) gives no sample at all,
never 0. Empty label values are left out (Prometheus reads them as absent). Pure: the caller
(``llmtop.export.state``) passes everything in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric

from llmtop.diagnose.findings import Finding
from llmtop.export.kv import kv
from llmtop.export.names import ENGINE_VALUES, QUANTILE_VALUES, QUANTILES, SERIES
from llmtop.export.routers import routers
from llmtop.model import GOOD_STATES, STATES, EngineRow, GpuRecord, Quantiles, Snapshot
from llmtop.model.logs import SEVERITIES

__all__ = ["Health", "View", "build"]


@dataclass(slots=True)
class Health:
    """The exporter's own numbers (counters since start, the last refresh)."""

    refreshes: int = 0
    refresh_errors: int = 0
    refresh_s: float | None = None
    scrapes: dict[str, int] = field(default_factory=dict)
    scrape_errors: dict[tuple[str, str], int] = field(default_factory=dict)
    scrape_s: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class View:
    """Everything one ``/metrics`` answer shows."""

    version: str
    mode: str
    snap: Snapshot | None
    findings: Sequence[Finding] = ()
    summaries: Mapping[tuple[str, str, str | None, str], str] = field(default_factory=dict)
    """(rule, target, model, severity) -> the sentence shown as ``summary``."""
    known: Mapping[str, tuple[str | None, tuple[str, ...]]] = field(default_factory=dict)
    """target -> (engine, models) last seen, so a target that went down keeps its labels."""
    health: Health = field(default_factory=Health)
    diag_window_s: float | None = None


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, (bool, str)):
        return None
    f = float(v)
    return None if math.isnan(f) or math.isinf(f) else f


class _Out:
    """Metrics by name, created in ``SERIES`` order (help and type from there)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Metric] = {}
        for s in SERIES:
            base = s.name.removesuffix("_total") if s.kind == "counter" else s.name
            self.by_name[s.name] = Metric(base, s.help, s.kind)

    def add(self, name: str, labels: Mapping[str, str | None], value: Any) -> None:
        v = _num(value)
        if v is None:
            return
        self.by_name[name].add_sample(name, {k: x for k, x in labels.items() if x}, v)

    def quantiles(self, name: str, labels: Mapping[str, str | None], q: Any) -> None:
        """One sample per quantile of ``q`` (a ``Quantiles``; anything else: none), with
        its ``quantile`` label (``QUANTILES``)."""
        if isinstance(q, Quantiles):
            for label, f in QUANTILES:
                self.add(name, {**labels, "quantile": label}, getattr(q, f))

    def metrics(self) -> list[Metric]:
        return [m for m in self.by_name.values() if m.samples]


def _engine_labels(row: EngineRow, rank: str | None = None) -> dict[str, str | None]:
    return {"target": row.target, "engine": row.engine, "model": row.model, "role": row.role,
            "rank": rank}


def _values(out: _Out, row: EngineRow, rank: str | None) -> None:
    labels = _engine_labels(row, rank)
    for name, attr, _ in ENGINE_VALUES:
        out.add(name, labels, getattr(row, attr))
    for name, attr, _ in QUANTILE_VALUES:
        out.quantiles(name, labels, getattr(row, attr))
    kv(out, row, labels)


def _state(out: _Out, target: str, engine: str | None, model: str | None, row: EngineRow
           ) -> None:
    labels = {"target": target, "engine": engine, "model": model, "role": row.role}
    out.add("llmtop_engine_up", labels, 1.0 if row.state in GOOD_STATES else 0.0)
    for s in STATES:
        out.add("llmtop_engine_state", {**labels, "state": s}, 1.0 if row.state == s else 0.0)
    out.add("llmtop_engine_last_ok_age_seconds", labels, row.last_ok_age_s)
    if engine:
        c = row.container  # where discovery found it (a container, pod or network namespace)
        out.add("llmtop_engine_info", {**labels, "version": row.engine_version, **(
            {"container_runtime": c.runtime, "container": c.name, "pod": c.pod,
             "pod_namespace": c.namespace, "netns": c.netns} if c is not None else {})}, 1.0)


def _engines(out: _Out, rows: Iterable[EngineRow],
             known: Mapping[str, tuple[str | None, tuple[str, ...]]]) -> None:
    for row in rows:
        if row.model is None and known.get(row.target, (None, ()))[1]:
            engine, models = known[row.target]
            for m in models:  # no model in the window (down a while): the labels it had
                _state(out, row.target, row.engine or engine, m, row)
            continue
        _state(out, row.target, row.engine, row.model, row)
        if row.state not in GOOD_STATES:
            continue  # no fresh numbers: the state says why
        _values(out, row, None)
        for r in row.ranks:
            _values(out, r, r.rank)


def _logs(out: _Out, rows: Iterable[EngineRow]) -> None:
    """Each followed log once per target: events by severity since start, readable."""
    seen: set[str] = set()
    for row in rows:
        log = row.log
        if log is None or row.target in seen:
            continue
        seen.add(row.target)
        for sev in SEVERITIES:
            out.add("llmtop_log_events_total", {"target": row.target, "severity": sev},
                    log.lines_total.get(sev, 0))
        readable = log.location is not None and log.location.error is None
        out.add("llmtop_log_readable", {"target": row.target}, 1.0 if readable else 0.0)


def _findings(out: _Out, v: View, engines: Mapping[str, str | None]) -> None:
    for f in v.findings:
        labels = {"target": f.target, "engine": engines.get(f.target), "model": f.model,
                  "rule": f.rule}
        summary = v.summaries.get((f.rule, f.target, f.model, f.severity), f.summary)
        out.add("llmtop_finding", {**labels, "severity": f.severity, "summary": summary}, 1.0)
        for e in f.evidence:
            el = {**labels, "signal": e.signal}
            out.add("llmtop_finding_value", el, e.value)
            out.add("llmtop_finding_threshold", el, e.threshold)
            out.add("llmtop_finding_baseline", el, e.baseline)


def _gpus(out: _Out, gpus: Iterable[GpuRecord]) -> None:
    for g in gpus:
        labels = {"host": g.host, "gpu": str(g.index), "uuid": g.uuid, "name": g.name}
        out.add("llmtop_gpu_up", labels, 0.0 if g.error else 1.0)
        if g.error:
            continue
        out.add("llmtop_gpu_utilization_ratio", labels, g.util)
        out.add("llmtop_gpu_sm_active_ratio", labels, g.sm_active)
        out.add("llmtop_gpu_sm_occupancy_ratio", labels, g.sm_occupancy)
        out.add("llmtop_gpu_tensor_active_ratio", labels, g.tensor_active)
        out.add("llmtop_gpu_dram_active_ratio", labels, g.dram_active)
        out.add("llmtop_gpu_memory_used_bytes", labels, g.mem_used_bytes)
        out.add("llmtop_gpu_memory_total_bytes", labels, g.mem_total_bytes)
        out.add("llmtop_gpu_power_watts", labels, g.power_w)
        out.add("llmtop_gpu_power_limit_watts", labels, g.power_limit_w)
        out.add("llmtop_gpu_temperature_celsius", labels, g.temp_c)
        for name, mhz in (("llmtop_gpu_sm_clock_hertz", g.sm_clock_mhz),
                          ("llmtop_gpu_sm_clock_max_hertz", g.sm_clock_max_mhz)):
            out.add(name, labels, None if mhz is None else mhz * 1e6)
        if g.throttle is not None:
            out.add("llmtop_gpu_throttled", labels, 1.0 if g.throttle else 0.0)
            for reason in g.throttle:
                out.add("llmtop_gpu_throttle_reason", {**labels, "reason": reason}, 1.0)
        for p in g.processes:
            pid = str(p.pid) if p.pid is not None else None
            out.add("llmtop_gpu_process_memory_bytes",
                    {"host": g.host, "gpu": str(g.index), "pid": pid, "target": p.engine_target},
                    p.used_bytes)


def _health(out: _Out, v: View) -> None:
    h = v.health
    out.add("llmtop_exporter_info", {"version": v.version, "mode": v.mode}, 1.0)
    out.add("llmtop_refreshes_total", {}, h.refreshes)
    out.add("llmtop_refresh_errors_total", {}, h.refresh_errors)
    out.add("llmtop_refresh_duration_seconds", {}, h.refresh_s)
    for t, n in h.scrapes.items():
        out.add("llmtop_scrapes_total", {"target": t}, n)
    for (t, st), n in h.scrape_errors.items():
        out.add("llmtop_scrape_errors_total", {"target": t, "state": st}, n)
    for t, s in h.scrape_s.items():
        out.add("llmtop_scrape_duration_seconds", {"target": t}, s)
    out.add("llmtop_diagnosis_window_seconds", {}, v.diag_window_s)


def build(v: View) -> list[Metric]:
    """The metrics of one view, in ``SERIES`` order, families without samples left out."""
    out = _Out()
    _health(out, v)
    snap = v.snap
    if snap is not None:
        out.add("llmtop_window_seconds", {}, snap.window_s)
        out.add("llmtop_refresh_timestamp_seconds", {}, snap.time)
        _engines(out, snap.engines, v.known)
        _logs(out, snap.engines)
        routers(out, snap.routers, GOOD_STATES)
        engines = {r.target: r.engine for r in snap.engines if r.engine}
        _findings(out, v, engines)
        out.add("llmtop_gpu_readable", {}, 0.0 if snap.gpu_error and not snap.gpus else 1.0)
        _gpus(out, snap.gpus)
    return out.metrics()
