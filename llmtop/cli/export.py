"""``llmtop export [TARGET ...] --listen ADDR:PORT``: serve rows, GPUs and findings to
Prometheus (``docs/exporter.md``), and the ``--listen`` options ``llmtop record`` shares.

Targets, discovery, the config file, ``--demo`` and fleet mode (``--prometheus URL``) are as
for ``llmtop``. Runs until SIGTERM/Ctrl-C (or ``--duration``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from llmtop.cli.stop import stop_event
from llmtop.export.server import DEFAULT_LISTEN, EXPORT_FLAGS

__all__ = ["add_listen_options", "build_parser", "main", "start_server"]

log = logging.getLogger("llmtop.export")

_SHARED = {"targets", "interval", "timeout", "config", "api_key", "insecure",
           "no_discover", "demo", "demo_scenario", "ttft_slo", "itl_slo", "capacity", "gpu_peak",
           "otlp_listen", "otlp_grpc_listen", "otlp_token_file", "otlp_no_auth",
           "otlp_tls_cert", "otlp_tls_key", "log", "no_logs"}
_FLEET = {"prometheus", "match", "group_by", "prometheus_token_file", "prometheus_user",
          "prometheus_password_file", "prometheus_header", "prometheus_param",
          "prometheus_ca_file"}


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {text!r}")
    return v


def add_listen_options(p: argparse.ArgumentParser, *, required: bool) -> None:
    """``--listen`` and its token and TLS options (export and record)."""
    from llmtop.cli import listen

    listen.add_listen_options(
        p, EXPORT_FLAGS, listen_default=DEFAULT_LISTEN if required else None,
        listen_help="serve /metrics here (default 127.0.0.1:9464 for export); a "
        "non-loopback address needs --listen-token-file or --listen-no-auth")


def build_parser(main: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``llmtop export`` parser: the target, demo and fleet options of ``main`` (the
    ``llmtop`` parser, passed in by ``cli.main``), plus listen."""
    p = argparse.ArgumentParser(
        prog="llmtop export",
        description="Serve the engines' normalized numbers, GPUs and findings on /metrics "
        "for Prometheus (docs/exporter.md). Loopback unless told otherwise.")
    fleet = p.add_argument_group("fleet mode (read a Prometheus-compatible server)")
    for act in main._actions:
        if act.dest in _SHARED:
            p._add_action(act)
        elif act.dest in _FLEET:
            fleet._add_action(act)
    add_listen_options(p, required=True)
    p.add_argument("--window", type=_positive, default=None, metavar="S",
                   help="the window rates and quantiles are taken over (default 10, the "
                   "TUI's); with --prometheus: the rate window (default max(4 x scrape "
                   "interval, 60))")
    p.add_argument("--duration", type=_positive, default=None, metavar="S",
                   help="stop after S seconds (default: run until stopped)")
    return p


def start_server(state: Any, args: argparse.Namespace) -> Any:
    """The ``MetricsServer`` of ``--listen`` (raises ``ConfigError`` on a bad address)."""
    from llmtop.export.server import MetricsServer

    server = MetricsServer(state.render, args.listen, token_file=args.listen_token_file,
                           no_auth=args.listen_no_auth, tls_cert=args.listen_tls_cert,
                           tls_key=args.listen_tls_key)
    auth = " (bearer token required)" if server.authenticated else ""
    log.info("serving %s%s", server.url, auth)
    return server


def _logging() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s llmtop-export: %(message)s")
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def main(argv: Sequence[str], parser: argparse.ArgumentParser) -> int:
    """Entry point of ``llmtop export`` (``parser``: ``build_parser(llmtop's parser)``)."""
    from llmtop.settings import build_config

    args = parser.parse_intermixed_args(list(argv))
    _logging()
    config = build_config(args)
    if config.prometheus is not None:
        if args.targets or args.demo:
            from llmtop.errors import ConfigError

            raise ConfigError(f"{'TARGET' if args.targets else '--demo'} cannot be used with "
                              "--prometheus (fleet mode reads the server)")
        return asyncio.run(_fleet(config, args))
    demo = None
    try:
        if args.demo:
            from llmtop.demo.launcher import start_demo

            demo = start_demo(scenario=args.demo_scenario, config=config)
            config = demo.apply(config)
        return asyncio.run(_direct(config, args, demo))
    finally:
        if demo is not None:
            demo.stop()


async def _direct(config: Any, args: argparse.Namespace, demo: Any) -> int:
    from llmtop.cli.watch import build_monitor, nothing_to_watch, start_targets
    from llmtop.diagnose.thresholds import DIAG_WINDOW_S
    from llmtop.export.run import direct_store, publish_direct, run
    from llmtop.export.state import ExportState
    from llmtop.history.store import SERIES_WINDOW_S
    from llmtop.targets import NO_TARGETS_MESSAGE

    found = await start_targets(config, log)
    if nothing_to_watch(found):
        log.error(NO_TARGETS_MESSAGE)
        return 1
    config = found.config(config)
    window = args.window if args.window is not None else SERIES_WINDOW_S
    state = ExportState("direct", diag_window_s=DIAG_WINDOW_S)
    from llmtop.cli.otlp import start_receiver

    spans = start_receiver(args)  # --otlp-listen: requests in the store (docs/requests.md)
    server = start_server(state, args)
    # no TARGET: the search goes on every 10 s, so an engine started later is exported
    monitor = build_monitor(config, found, demo, store=direct_store(config), receiver=spans)
    monitor.sink = state.observe
    log.info("exporting %d target(s) every %gs, window %gs: %s", len(config.targets),
             config.interval_s, window, ", ".join(t.name for t in config.targets))

    async def refresh() -> None:
        t0 = time.monotonic()
        snap = await monitor.tick()
        publish_direct(state, monitor, snap, window, t0)

    try:
        await run(refresh, config.interval_s, stop_event(), duration_s=args.duration,
                  state=state)
    finally:
        await monitor.aclose()
        server.close()
    return 0


async def _fleet(config: Any, args: argparse.Namespace) -> int:
    from llmtop.diagnose.thresholds import DIAG_WINDOW_S
    from llmtop.export.run import publish_fleet, run
    from llmtop.export.state import ExportState
    from llmtop.fleet.monitor import FleetMonitor

    state = ExportState("fleet", diag_window_s=DIAG_WINDOW_S)
    server = start_server(state, args)
    mon = FleetMonitor(config)
    log.info("exporting the fleet of %s", mon.display_url)

    async def refresh() -> None:
        t0 = time.monotonic()
        snap = await mon.tick()
        publish_fleet(state, mon, snap, t0)

    try:  # the monitor refreshes no faster than the server scrapes
        await run(refresh, max(config.interval_s, 1.0), stop_event(),
                  duration_s=args.duration, state=state)
    finally:
        await mon.aclose()
        server.close()
    return 0
