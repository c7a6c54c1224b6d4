"""``llmtop record FILE [TARGET ...]`` (headless recorder) and ``llmtop replay FILE``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

from llmtop.cli.stop import stop_event
from llmtop.errors import RecordingError

__all__ = ["record_main", "replay_main"]

log = logging.getLogger("llmtop.record")


def _positive(text: str) -> float:
    """An argparse type: a finite number > 0 (a speed, a duration, a window)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text!r}")
    return v


def _record_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llmtop record",
        description="Record raw scrapes and GPU samples to FILE, headless, until SIGTERM/Ctrl-C.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="as for llmtop; none: autodiscover on localhost")
    p.add_argument("--interval", type=float, default=None, metavar="S", help="default 1")
    p.add_argument("--timeout", type=float, default=None, metavar="S")
    p.add_argument("--retention", type=float, default=None, metavar="HOURS",
                   help="drop data older than this (whole 5-minute segments)")
    p.add_argument("--max-size", default=None, metavar="SIZE",
                   help="cap the file size, e.g. 200M; the oldest data is dropped first")
    p.add_argument("--duration", type=_positive, default=None, metavar="S",
                   help="stop after S seconds (default: run until stopped)")
    p.add_argument("--config", default=None, metavar="FILE")
    p.add_argument("--api-key", default=None, metavar="KEY")
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--no-discover", action="store_true")
    from llmtop.cli.argv import add_log_options

    add_log_options(p)  # --log TARGET=PATH, --no-logs: the engines' logs are recorded too
    p.add_argument("--demo", action="store_true", help="record the built-in demo engines")
    p.add_argument("--demo-scenario", default=None, metavar="NAME")
    p.add_argument("--gpu-peak", default=None, metavar="GBPS,TFLOPS",
                   help="the GPU peak MBU/MFU divide by, kept in the recording (docs/gpu.md)")
    p.add_argument("--keep-prompts", action="store_true",
                   help="keep the prompts and outputs an engine logs (dropped by default)")
    from llmtop.cli.export import add_listen_options

    add_listen_options(p, required=False)  # --listen: also serve /metrics (docs/exporter.md)
    from llmtop.cli.otlp import add_otlp_options

    add_otlp_options(p)  # --otlp-listen: record the engines' request spans too
    return p


def record_main(argv: Sequence[str]) -> int:
    """Entry point of ``llmtop record``."""
    from llmtop.record.recorder import parse_size
    from llmtop.settings import build_config

    args = _record_parser().parse_intermixed_args(list(argv))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s llmtop-record: %(message)s")
    for noisy in ("httpx", "httpcore"):  # one line per scrape would flood the journal
        logging.getLogger(noisy).setLevel(logging.WARNING)
    max_bytes = parse_size(args.max_size)
    retention_s = args.retention * 3600 if args.retention is not None else None
    if retention_s is not None and retention_s <= 0:
        raise RecordingError("--retention must be positive")
    config = build_config(args)
    demo = None
    try:
        listen: dict[str, Any] = {"listen": args} if args.listen else {}  # also /metrics
        from llmtop.cli.otlp import start_demo_sending, start_receiver

        spans = start_receiver(args)  # --otlp-listen: the spans go to the recording too
        if spans is not None:
            listen["spans"] = spans
        if args.demo:  # with --otlp-listen, the demo vLLM's request spans are recorded
            demo = start_demo_sending(args, config, spans)
            config = demo.apply(config)
        return asyncio.run(_record(config, args.file, retention_s, max_bytes, args.duration,
                                   demo, keep_prompts=args.keep_prompts, **listen))
    finally:
        if demo is not None:
            demo.stop()


async def _record(config: Any, path: str, retention_s: float | None, max_bytes: int | None,
                  duration: float | None, demo: Any, listen: Any = None,
                  spans: Any = None, keep_prompts: bool = False) -> int:
    from llmtop.cli.watch import build_monitor, nothing_to_watch, start_targets
    from llmtop.record.live import RecordingMonitor
    from llmtop.record.recorder import Recorder
    from llmtop.targets import NO_TARGETS_MESSAGE

    found = await start_targets(config, log)
    if nothing_to_watch(found) and spans is None:
        log.error(NO_TARGETS_MESSAGE)
        return 1
    config = found.config(config)
    recorder = Recorder(path, config, retention_s=retention_s, max_bytes=max_bytes,
                        keep_prompts=keep_prompts)
    exporter = _Exporter(config, listen) if listen is not None else None
    # no TARGET: the search goes on every 10 s, so an engine started (or restarted on
    # another port) during the recording is recorded from then on
    mon = build_monitor(config, found, demo, store=exporter.store if exporter else None,
                        receiver=spans)
    monitor = RecordingMonitor(mon, recorder)
    if exporter is not None:  # the scrapes go to the recording and to the exporter's counts
        monitor.monitor.sink = exporter.sink(recorder)
    stop = stop_event()
    log.info("recording %d target(s) every %gs to %s: %s", len(config.targets),
             config.interval_s, path, ", ".join(t.name for t in config.targets))
    started = time.monotonic()
    deadline = started + duration if duration else None
    seen_events = 0
    last_stats = started
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            snap = await monitor.tick()
            if exporter is not None:
                exporter.publish(monitor, snap, t0)
            events = list(monitor.store.events)
            for ev in events[seen_events:]:
                if ev.target is None and ev.text in found.notes:
                    continue  # said at the start already (start_targets)
                log.info("%s%s", f"{ev.target}: " if ev.target else "", ev.text)
            seen_events = len(events)
            now = time.monotonic()
            if now - last_stats >= 300:
                hours = (now - started) / 3600
                log.info("%d ticks, %.2f MB written (%.2f MB/h)", monitor.monitor.ticks,
                         recorder.bytes_written / 1e6, recorder.bytes_written / 1e6 / hours)
                last_stats = now
            if deadline is not None and now >= deadline:
                break
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, config.interval_s - (now - t0)))
            except TimeoutError:
                pass
    finally:
        await monitor.aclose()
        if exporter is not None:
            exporter.close()
    log.info("stopped after %.0fs; %.2f MB written to %s", time.monotonic() - started,
             recorder.bytes_written / 1e6, path)
    return 0


class _Exporter:
    """``record --listen``: the recorder's refreshes also served on /metrics."""

    def __init__(self, config: Any, args: Any) -> None:
        from llmtop.cli.export import start_server
        from llmtop.diagnose.thresholds import DIAG_WINDOW_S
        from llmtop.export.run import direct_store
        from llmtop.export.state import ExportState

        self.state = ExportState("record", diag_window_s=DIAG_WINDOW_S)
        self.store = direct_store(config)
        self.server = start_server(self.state, args)

    def sink(self, recorder: Any) -> Any:
        from llmtop.export.run import tee

        return tee(recorder, self.state.observe)

    def publish(self, monitor: Any, snap: Any, t0: float) -> None:
        from llmtop.export.run import publish_direct

        try:
            publish_direct(self.state, monitor, snap, snap.window_s, t0)
        except Exception as exc:  # the recording goes on whatever the exporter does
            self.state.health.refresh_errors += 1
            log.warning("export failed: %s: %s", type(exc).__name__, exc)

    def close(self) -> None:
        self.server.close()


def _replay_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llmtop replay",
        description="Open a recording in the TUI (keys: p play/pause, x speed, , . step, "
        "[ ] ±1 min, { } ±10 min, : seek), or print one --once snapshot from it.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--at", default=None, metavar="TIME",
                   help="HH:MM[:SS] (local), @UNIX, end, or an offset from the start (90, 5m, 1h)")
    p.add_argument("--once", action="store_true",
                   help="print the snapshot --once would have printed at --at, and exit")
    p.add_argument("--json", action="store_true", help="with --once: one JSON object")
    p.add_argument("--window", type=_positive, default=1.0, metavar="S",
                   help="with --once: the window --once used (default 1)")
    p.add_argument("--speed", type=_positive, default=1.0, metavar="X",
                   help="playback speed, any positive number (default 1; the x key cycles "
                   "1, 10, 60)")
    p.add_argument("--theme", default=None)
    p.add_argument("--capacity", default=None, metavar="FILE",
                   help="capacity profiles from this report or profile, instead of the saved "
                   "ones (docs/capacity.md)")
    p.add_argument("--gpu-peak", default=None, metavar="GBPS,TFLOPS",
                   help="the GPU peak MBU/MFU divide by (docs/gpu.md)")
    return p


def replay_main(argv: Sequence[str]) -> int:
    """Entry point of ``llmtop replay``."""
    from llmtop.record.reader import Recording
    from llmtop.record.replay import ReplaySource, diagnosis_at, parse_when, snapshot_at

    args = _replay_parser().parse_intermixed_args(list(argv))
    rec = Recording.open(args.file)
    if rec.problem:
        print(f"llmtop: {args.file}: {rec.problem}", file=sys.stderr)
    if rec.start is None:
        raise RecordingError(f"{args.file}: the recording holds no data")
    try:
        at = parse_when(args.at, rec) if args.at else rec.end
    except ValueError as exc:
        raise RecordingError(str(exc)) from exc
    from llmtop.fleet.record import is_fleet

    if is_fleet(rec):  # a fleet mode recording: each refresh's raw answers
        if args.once:
            from llmtop.cli.fleet import replay_fleet_once

            return replay_fleet_once(rec, at, as_json=args.json)
        from llmtop.cli.fleet import tui_config
        from llmtop.fleet.replay import FleetReplay
        from llmtop.ui.app import run_fleet

        replay = FleetReplay(rec, at if args.at else None, speed=args.speed)
        return run_fleet(replay, tui_config(replay.config), theme=args.theme)
    config = None
    if args.capacity:
        import dataclasses

        from llmtop.capacity import load_profile_file
        from llmtop.config import Config

        load_profile_file(args.capacity)  # a bad file stops here
        config = dataclasses.replace(Config(), capacity_file=args.capacity)
    if args.gpu_peak:
        import dataclasses

        from llmtop.config import Config
        from llmtop.errors import ConfigError
        from llmtop.gpu.peaks import parse_gpu_peak

        try:
            peak = parse_gpu_peak(args.gpu_peak)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        config = dataclasses.replace(config or Config(), gpu_peak=peak)
    if args.once:
        snap = snapshot_at(rec, at, args.window, config)
        findings = diagnosis_at(rec, at, config)  # the recording before --at is the baseline
        if args.json:
            from llmtop.once import snapshot_json

            print(snapshot_json(snap, findings))
        else:
            from llmtop.console.once_table import print_once

            print_once(snap, file=sys.stdout, diagnosis=findings)
        return 0
    source = ReplaySource(rec, config)
    source.speed = args.speed
    if args.at:
        source.seek(args.at)
    from llmtop.ui.app import run_source

    return run_source(source, source.config, host=source.host, theme=args.theme)
