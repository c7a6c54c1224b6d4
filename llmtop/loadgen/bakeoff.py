"""The bake-off: the same request list against several engines, one at a time.

For each engine, in order: start it when the plan says how (``engines.EngineProcess``: own
process group, log file, cold start = start -> ready -> first token), read what it says
about itself (``fairness.engine_info``), watch its metrics (``server_side.ServerWatch``, the
monitor's rows), run the ordinary probe (``api.start_probe``) in bake-off mode (every level,
each a fixed list of max(N, 4 x concurrency) requests, exact lengths asked), stop it and
wait for its GPU memory. (The monitor comes in as ``new_monitor``: loadgen never imports
it.) The first engine that runs fixes the prompt calibration and the context cap, so every
engine gets byte-identical prompts; the report carries the hash of the list each engine was
sent. An engine that fails gets an error row; the others still run.
``stop.requested`` (Ctrl-C) stops the engine in progress and keeps the partial report.

Report: ``{"kind": "bakeoff", "endpoints": [...], "traffic": {...}, "warnings": [...]}``;
each endpoint is the single-probe report plus the fields listed in docs/probe.md.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmtop.loadgen.api import ProbeHandle, start_probe
from llmtop.loadgen.coldstart import describe, stages, traced
from llmtop.loadgen.cost import cost_per_mtok
from llmtop.loadgen.engines import (
    EngineProcess,
    LaunchError,
    first_token,
    gpu_memory_used_mib,
    wait_gpu_released,
    wait_ready,
)
from llmtop.loadgen.fairness import engine_info, fairness_warnings, short_fraction
from llmtop.loadgen.options import ProbeOptions, redact_url
from llmtop.loadgen.plan import EngineSpec
from llmtop.loadgen.reconcile import Preflight
from llmtop.loadgen.report import load_text
from llmtop.loadgen.server_side import ServerWatch, empty_server

__all__ = ["DEFAULT_REQUESTS_PER_STEP", "EngineRun", "StopFlag", "bakeoff_options",
           "default_log_dir", "generator_warnings", "run_bakeoff"]

DEFAULT_REQUESTS_PER_STEP = 32
"""Measured requests per level when not given (never fewer than 4 x the concurrency)."""

Say = Callable[[str], None]
Drive = Callable[[EngineSpec, ProbeOptions, ProbeHandle, "StopFlag"], None]


@dataclass
class StopFlag:
    """Ctrl-C count, set by the caller's signal handler."""

    count: int = 0

    @property
    def requested(self) -> bool:
        return self.count > 0


def bakeoff_options(options: ProbeOptions) -> ProbeOptions:
    """The probe options every engine runs with: a sweep of fixed request lists."""
    return dataclasses.replace(
        options, sweep=True,
        requests_per_step=options.requests_per_step or DEFAULT_REQUESTS_PER_STEP,
        levels=options.levels or (None if options.concurrency is None
                                  else (options.concurrency,))).validate()


def _drive_plain(spec: EngineSpec, options: ProbeOptions, handle: ProbeHandle,
                 stop: StopFlag) -> None:
    """Wait for the probe, passing Ctrl-C on (used without a live display)."""
    t_stop = None
    while not handle.finished:
        if stop.count >= 1 and t_stop is None:
            t_stop = time.monotonic()
            handle.stop()
        if stop.count >= 2 or (t_stop is not None and time.monotonic() - t_stop > 10):
            handle.kill()
            break
        handle.wait(0.1)


def _entry(spec: EngineSpec) -> dict[str, Any]:
    return {"name": spec.name, "url": redact_url(spec.url), "engine": None,
            "engine_version": None, "error": None, "cold_start_s": None, "ready_s": None,
            "cold_start_stages": None,
            "log": None, "started_by_llmtop": spec.start is not None, "settings": None,
            "server": empty_server("not run"), "cost_per_mtok_usd": None,
            "short_outputs": None, "comparable": True, "steps": [], "gpu_release": None,
            "cold_start_requests": Preflight().to_json()}


class EngineRun:
    """Start, measure and stop engines one after another (the tuner overrides
    ``_measure``)."""

    def __init__(self, options: ProbeOptions, *, gpu_hour_price: float | None,
                 log_dir: str, say: Say, drive: Drive, stop: StopFlag,
                 watch_interval_s: float, new_monitor: Callable[[Any], Any] | None) -> None:
        self.o = bakeoff_options(options)
        self.price = gpu_hour_price
        self.log_dir = log_dir
        self.say = say
        self.drive = drive
        self.stop = stop
        self.watch_interval_s = watch_interval_s
        self.new_monitor = new_monitor
        self.fixed: dict[str, Any] = {}
        """calibration and context, from the first engine that ran."""

    def engine(self, i: int, n: int, spec: EngineSpec) -> dict[str, Any]:
        e = _entry(spec)
        if self.stop.requested:
            e["error"] = "not run: the bake-off was stopped (Ctrl-C)"
            return e
        self.say(f"[{i + 1}/{n}] {spec.name} ({redact_url(spec.url)})")
        proc = spans = None
        gpu_before = gpu_memory_used_mib() if spec.start else None
        try:
            if spec.start:
                proc, spans = self._launch(spec, e)
                self._cold_start(spec, e, proc, spans)
            self._measure(spec, e, proc)
        except LaunchError as exc:
            e["error"] = str(exc)
            e["log_tail"] = exc.log_tail or None
            self.say(f"  {spec.name}: {exc}")
            if exc.log_tail:
                self.say("  last lines of its log:\n    "
                         + exc.log_tail.replace("\n", "\n    "))
        except Exception as exc:  # one engine's failure never ends the bake-off
            e["error"] = f"{type(exc).__name__}: {exc}"
            self.say(f"  {spec.name}: {e['error']}")
        finally:
            if spans is not None:
                spans.close()
            if proc is not None:
                status = proc.stop(spec.stop_timeout_s)
                e["exit_status"] = status
                e["gpu_release"] = wait_gpu_released(gpu_before)
                self.say(f"  stopped {spec.name} (exit status {status}); {e['gpu_release']}")
        return e

    def _launch(self, spec: EngineSpec, e: dict[str, Any]) -> tuple[EngineProcess, Any]:
        """Start the engine (a vLLM with its tracing on: ``coldstart.traced``); the process
        and the receiver of its start-up spans (None when not traced)."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.name)
        log = os.path.join(self.log_dir, f"{safe}.log")
        cmd, env, spans = traced(spec)
        try:
            proc = EngineProcess.start(cmd or "", env=env, log_path=log,
                                       gpus=spec.cuda_visible_devices)
        except BaseException:
            if spans is not None:
                spans.close()
            raise
        e["log"] = log
        e["pid"] = proc.child.pid
        self.say(f"  started: pid {proc.child.pid}, log {log}")
        return proc, spans

    def _cold_start(self, spec: EngineSpec, e: dict[str, Any], proc: EngineProcess,
                    spans: Any = None) -> None:
        """Wait until ready, then time the first token (and read where the start went)."""
        try:
            wait_ready(spec.url, timeout_s=spec.ready_timeout_s, api_key=self.o.api_key,
                       proc=proc, insecure=self.o.insecure,
                       should_stop=lambda: self.stop.requested)
        except LaunchError:
            e["log_tail"] = proc.child.tail()
            raise
        books = Preflight()  # sent before the probe reads the server's counters
        t = first_token(spec.url, self.o.model, api_key=self.o.api_key,
                        endpoint=self.o.endpoint, insecure=self.o.insecure, books=books)
        e["cold_start_requests"] = books.to_json()
        proc.t_first_token = t
        e["ready_s"] = proc.ready_s
        e["cold_start_s"] = proc.cold_start_s
        cs = f"{proc.cold_start_s:.1f} s" if proc.cold_start_s is not None else "no token"
        self.say(f"  ready after {proc.ready_s:.1f} s; cold start (to the first token) {cs}")
        if spans is not None:
            e["cold_start_stages"] = st = stages(spans)
            self.say(f"  where the start went: {describe(st)}")

    def _measure(self, spec: EngineSpec, e: dict[str, Any], proc: EngineProcess | None
                 ) -> None:
        info = engine_info(spec.url, api_key=self.o.api_key, insecure=self.o.insecure)
        e["settings"] = info
        opts = dataclasses.replace(self.o, url=spec.url, **self.fixed).validate()
        report, server = self.probe(spec, opts)
        e.update(report)
        e["server"] = server
        e["engine"] = server.get("engine")
        e["engine_version"] = server.get("engine_version") or info.get("version")
        e["short_outputs"] = short_fraction(report)
        e["cost_per_mtok_usd"] = cost_per_mtok(
            report, spec.gpu_hour_price if spec.gpu_hour_price is not None else self.price,
            spec.gpus)
        self.fix_calibration(spec, report)

    def probe(self, spec: EngineSpec, opts: ProbeOptions, drive: Drive | None = None,
              on_watch: Callable[[ServerWatch | None], None] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """One probe run on the engine while its metrics are watched: (report, server peaks).
        ``on_watch`` is told the watch before the load starts (a caller's early stop reads
        it). Raises ``LaunchError`` when the probe gave no report."""
        watch = None
        if self.new_monitor is not None:
            watch = ServerWatch(spec.url, self.new_monitor, api_key=self.o.api_key,
                                insecure=self.o.insecure,
                                interval_s=self.watch_interval_s).start()
        if on_watch is not None:
            on_watch(watch)
        handle = start_probe(opts)
        try:
            (drive or self.drive)(spec, opts, handle, self.stop)
        finally:
            if not handle.finished:
                handle.kill()
            server = watch.stop() if watch is not None else empty_server("not watched")
        report = handle.result()
        if report is None and handle.steps:
            from llmtop.loadgen.report import partial_report

            report = partial_report(opts, handle.steps)
        if report is None:
            raise LaunchError("; ".join(handle.errors) or "the probe gave no report")
        return report, server

    def fix_calibration(self, spec: EngineSpec, report: dict[str, Any]) -> None:
        """The first engine that ran fixes the prompt calibration and the context cap."""
        if not self.fixed and report.get("prompt_calibration"):
            cal = dict(report["prompt_calibration"])
            cal["method"] = f"{cal.get('method')} (measured on {spec.name})"
            self.fixed = {"calibration": cal, "context": self.o.context or report.get("context")}


def default_log_dir(kind: str = "bakeoff") -> str:
    """Where the engines' logs go, kept after the run (they are the evidence of a failed
    start): ``$XDG_STATE_HOME/llmtop/<kind>/<UTC time>-<pid>`` (``~/.local/state/...``)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"),
                                                             ".local", "state")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = os.path.join(state, "llmtop", kind, f"{stamp}-{os.getpid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def run_bakeoff(engines: tuple[EngineSpec, ...] | list[EngineSpec], options: ProbeOptions, *,
                gpu_hour_price: float | None = None, log_dir: str | None = None,
                say: Say = lambda _s: None, drive: Drive | None = None,
                stop: StopFlag | None = None, watch_interval_s: float = 1.0,
                new_monitor: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """Run every engine in order; the bake-off report (partial after a stop).

    ``new_monitor(config)`` makes the monitor that reads each engine's metrics during its run
    (``llmtop.monitor.Monitor.from_config``); None: no server-side numbers."""
    if log_dir is None:
        log_dir = default_log_dir()
    run = EngineRun(options, gpu_hour_price=gpu_hour_price, log_dir=log_dir, say=say,
               drive=drive or _drive_plain, stop=stop or StopFlag(),
               watch_interval_s=watch_interval_s, new_monitor=new_monitor)
    started = time.time()
    endpoints = [run.engine(i, len(engines), spec) for i, spec in enumerate(engines)]
    for e in endpoints:
        f = e.get("short_outputs")
        e["comparable"] = e["error"] is None and not (f is not None and f > 0.05)
    return {"kind": "bakeoff", "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                        time.gmtime(started)),
            "duration_s": time.time() - started, "options": run.o.to_json(),
            "gpu_hour_price": gpu_hour_price, "log_dir": log_dir,
            "partial": run.stop.requested, "traffic": _traffic(run.o, endpoints),
            "endpoints": endpoints,
            "warnings": fairness_warnings(endpoints) + generator_warnings(endpoints)}


def generator_warnings(endpoints: list[dict[str, Any]]) -> list[str]:
    """A sentence per engine whose run had a client-bound (stalled, late) load generator,
    or whose counts did not add up: those numbers are not the engine's."""
    out = []
    for e in endpoints:
        bound = [s for s in e.get("steps") or [] if s.get("client_bound")]
        if bound:
            why = "; ".join(f"{load_text(s)}: {', '.join(s.get('client_bound_reasons') or [])}"
                            for s in bound)
            out.append(f"{e.get('name')}: the load generator was client-bound during its run "
                       f"({why}); those levels measured the generator, not the engine.")
        rec = e.get("reconciliation")
        if rec and not rec.get("ok"):
            out.append(f"{e.get('name')}: counts do not add up: "
                       + "; ".join(rec.get("warnings") or []))
    return out


def _traffic(o: ProbeOptions, endpoints: list[dict[str, Any]]) -> dict[str, Any]:
    ran = [e for e in endpoints if e.get("request_list_sha256")]
    hashes = {e["request_list_sha256"] for e in ran}
    first = ran[0] if ran else {}
    kind = "dataset" if o.dataset else ("engine" if o.traffic else "synthetic")
    return {"kind": kind, "seed": o.seed, "requests_per_step": first.get("requests_per_step"),
            "warmup": "one request per slot before each level" if o.warmup != 0 else "none",
            "hash": next(iter(hashes)) if len(hashes) == 1 else None,
            "identical": len(hashes) == 1 if ran else None,
            "prompt_tokens": o.prompt_tokens, "output_tokens": o.output_tokens,
            "length_dist": o.length_dist, "exact_lengths": "ignore_eos + min_tokens",
            "calibration": first.get("prompt_calibration")}
