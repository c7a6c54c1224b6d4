"""``llmtop --prometheus URL --once [--json]``, and the TUI's config for fleet mode.

JSON is the direct mode's schema (``docs/json-schema.md``) plus ``time`` (the evaluation
time of every query), ``window_s``, ``source`` (kind, URL without credentials, version),
``warnings``, ``partial``, ``error`` and ``totals`` (one row per model), and ``baseline``:
the diagnosis' warm-up from the server's history (``llmtop.fleet.warm``), whose points are
the baseline the findings were judged against. Exit status 0 when rows came back, 1 when
the server could not be read or held no engine series.
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import json
import sys
import time
from typing import Any, TextIO

from llmtop import __version__
from llmtop.config import Config
from llmtop.fleet.monitor import FleetMonitor
from llmtop.model import Snapshot

__all__ = ["fleet_json", "fleet_recorder", "header_line", "replay_fleet_once", "run_fleet_once",
           "tui_config", "tui_monitor"]


def fleet_json(mon: FleetMonitor, snap: Snapshot) -> dict[str, Any]:
    """The ``--once --json`` document of one fleet snapshot."""
    from llmtop.once import _finite

    doc = snap.to_json(__version__)
    doc["time"] = snap.time
    doc["window_s"] = snap.window_s
    doc["source"] = mon.source_json()
    doc["mode"] = "fleet"
    doc["scrape_interval_s"] = mon.scrape_interval_s
    doc["warnings"] = list(mon.warnings)
    doc["partial"] = mon.partial
    doc["error"] = ({"kind": mon.error.kind, "message": mon.error.message,
                     "http_status": mon.error.http_status} if mon.error else None)
    doc["totals"] = [r.to_json() for r in mon.totals]
    doc["queries"] = mon.queries_last
    doc["recording_rules"] = len(mon.plan.rules) if mon.plan is not None else 0
    return _finite(doc)


def header_line(mon: FleetMonitor, snap: Snapshot | None) -> str:
    """The ``--once`` first line: the monitor's header and the evaluation time."""
    t = snap.time if snap is not None else mon.eval_time
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "–"
    return f"{mon.header_text()} · evaluated at {when}"


def tui_config(config: Config) -> Config:
    """The TUI polls no faster than the fleet refresh (>= the scrape interval, default 10 s);
    the monitor also refuses to refresh faster than its scrape interval."""
    p = config.prometheus
    assert p is not None
    return dataclasses.replace(config, interval_s=max(p.refresh_s or 10.0, 1.0))


def fleet_recorder(config: Config, path: str, *, retention_s: float | None = None,
                   max_bytes: int | None = None) -> Any:
    """A ``Recorder`` for fleet mode (``--record`` with ``--prometheus``): header schema 2,
    mode ``fleet``; give its ``record`` to ``FleetMonitor.sink``."""
    from llmtop.fleet.record import fleet_header
    from llmtop.record.recorder import Recorder

    return Recorder(path, config, retention_s=retention_s, max_bytes=max_bytes,
                    header=fleet_header(config))


def tui_monitor(config: Config, recorder: Any = None) -> FleetMonitor:
    """The fleet TUI's monitor: lean (the buckets only the detail screen shows are asked for
    the opened row), unless it records: a recording keeps every histogram."""
    mon = FleetMonitor(config, lean=recorder is None)
    if recorder is not None:
        mon.sink = recorder.record
    return mon


def run_fleet_once(config: Config, *, as_json: bool = False, out: TextIO | None = None,
                   err: TextIO | None = None, transport: Any = None,
                   recorder: Any = None) -> int:
    """One refresh, printed (and recorded with ``recorder``); the exit status (see the
    module docstring)."""
    return asyncio.run(_once(config, as_json, out or sys.stdout, err or sys.stderr, transport,
                             recorder))


def replay_fleet_once(rec: Any, at: float, *, as_json: bool = False,
                      out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``llmtop replay F --at T --once [--json]`` of a fleet recording: the refresh recorded
    at or before T, rebuilt by the live row builder and printed as live ``--once`` did."""
    from llmtop.fleet.record import refresh_times
    from llmtop.fleet.replay import fleet_snapshot_at, load_baseline

    mon, snap = fleet_snapshot_at(rec, at)
    baseline = None
    if mon.error is None:  # judged on the baseline the live run had (its recorded warm-up)
        times = refresh_times(rec)
        i = bisect.bisect_left(times, snap.time - 1e-6)
        _, baseline = load_baseline(mon.diagnoser, rec, times, i, snap)
    return _print(mon, snap, as_json, out or sys.stdout, err or sys.stderr,
                  list(mon.diagnoser.findings) if mon.error is None else [],
                  baseline=baseline)


async def _once(config: Config, as_json: bool, out: TextIO, err: TextIO, transport: Any,
                recorder: Any = None) -> int:
    mon = FleetMonitor(config, transport=transport)
    if recorder is not None:
        mon.sink = recorder.record
    try:
        snap = await mon.tick()
        warmup = await mon.warmed()  # the baseline from the server's history before snap
    finally:
        await mon.aclose()
        if recorder is not None:
            recorder.close()
    notes = [e.text for e in mon.diagnoser.take_events() if e.target is None]
    baseline = None
    if warmup is not None:  # the warm-up's outcome in words: its own note, not a warning
        baseline = warmup.to_json(mon.diagnoser.warm_points if warmup.error is None
                                  and warmup.points else 0)
        baseline["note"] = notes[-1] if notes else None
    return _print(mon, snap, as_json, out, err, findings=list(mon.diagnoser.findings)
                  if mon.error is None else [], baseline=baseline)


def _print(mon: FleetMonitor, snap: Snapshot, as_json: bool, out: TextIO, err: TextIO,
           findings: list[Any], baseline: dict[str, Any] | None = None) -> int:
    """Print one refresh and its ``findings`` (``baseline``: the warm-up's JSON object)."""
    if as_json:
        doc = fleet_json(mon, snap)
        doc["diagnosis"] = [f.to_json() for f in findings]
        doc["baseline"] = baseline
        print(json.dumps(doc, indent=2, allow_nan=False), file=out)
    else:
        from llmtop.console.once_table import print_once

        print(header_line(mon, snap), file=out)
        for w in mon.warnings:
            print(f"warning: {w}", file=out)
        if baseline is not None and baseline.get("note"):
            print(baseline["note"], file=out)
        if snap.engines:
            print_once(snap, file=out, diagnosis=findings)
        if mon.totals:
            print("per-model totals (rates summed, quantiles from the summed bucket rates):",
                  file=out)
            print_once(Snapshot(time=snap.time, window_s=snap.window_s, engines=mon.totals),
                       file=out)
    if mon.error is not None:
        print(f"llmtop: {mon.display_url}: {mon.error.message}", file=err)
        return 1
    return 0 if snap.engines else 1
