"""The monitor's command line: ``llmtop [TARGET ...]`` (TUI), ``--once``, ``--demo``, fleet
mode (``--prometheus URL``) and ``--record``.

``llmtop demo fleet`` runs this after starting its Prometheus; ``cli/main.py`` dispatches
here when no subcommand is given. Neither textual nor rich at import time.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from llmtop import __version__
from llmtop.cli.commands import listing

if TYPE_CHECKING:
    from llmtop.config import Config

__all__ = ["build_parser", "run", "run_monitor"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(minimum: float, *, inclusive: bool) -> Callable[[str], float]:
    """An argparse type: a finite float >= (or >) ``minimum``."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(v) or v < minimum or (v == minimum and not inclusive):
            op = ">=" if inclusive else ">"
            raise argparse.ArgumentTypeError(f"must be a finite number {op} {minimum:g}: {text!r}")
        return v

    return parse


_NON_NEGATIVE = _number(0.0, inclusive=True)
_POSITIVE = _number(0.0, inclusive=False)


def build_parser() -> argparse.ArgumentParser:
    """The main (monitor) argument parser."""
    p = _Parser(
        prog="llmtop",
        description=f"htop for LLM inference servers. Subcommands: {listing()} "
        "(see 'llmtop SUBCOMMAND --help'). New here? Try: llmtop --demo",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="host:port or URL, optionally with an engine hint and path "
        "(vllm@127.0.0.1:8000, http://h:8002/metrics). None: autodiscover on localhost.",
    )
    p.add_argument("--version", action="version", version=f"llmtop {__version__}")
    p.add_argument("--once", action="store_true", help="scrape twice, print one table, exit")
    p.add_argument("--json", action="store_true", help="with --once: print one JSON object")
    p.add_argument("--window", type=_NON_NEGATIVE, default=None, metavar="S",
                   help="with --once: seconds between the two scrapes (default 1); with "
                   "--prometheus: the rate window (default max(4 x scrape interval, 60))")
    p.add_argument("--demo", action="store_true",
                   help="start simulated vLLM, SGLang and Triton/TRT-LLM engines on loopback "
                   "and monitor them")
    p.add_argument("--demo-scenario", metavar="NAME", default=None,
                   help="faults: restart | down | garbage | slow; load: kv-pressure | "
                   "queue-spike | prefix-thrash; diagnosis, a healthy baseline (30 s or "
                   "$LLMTOP_DEMO_BASELINE_S) then the anomaly: queueing | long-prompts | "
                   "prefix-miss | decode-slowdown | gpu-throttle | errors | imbalance | "
                   "spec-decode-drop | gpu-bound | gpu-idle; serving stacks: stack | routing | "
                   "routing-down | pd-balance | kv-transfer | stuck (docs/demo.md)")
    p.add_argument("--interval", type=_POSITIVE, default=None, metavar="S",
                   help="refresh interval in seconds (default 1)")
    p.add_argument("--timeout", type=_POSITIVE, default=None, metavar="S",
                   help="per-target scrape timeout (default 2)")
    p.add_argument("--theme", default=None,
                   help="dark | light | high-contrast | mono | a user theme")
    p.add_argument("--ttft-slo", type=_POSITIVE, default=None, metavar="S",
                   help="TTFT SLO in seconds")
    p.add_argument("--itl-slo", type=_POSITIVE, default=None, metavar="S",
                   help="ITL SLO in seconds")
    p.add_argument("--gpu-required", action="store_true",
                   help="exit with an error when GPUs cannot be read")
    p.add_argument("--api-key", default=None, metavar="KEY",
                   help="bearer token for all targets (or LLMTOP_API_KEY, or the config file)")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="config file (default $XDG_CONFIG_HOME/llmtop/config.toml)")
    p.add_argument("--no-discover", action="store_true",
                   help="do not autodiscover engines when no target is given")
    from llmtop.cli.argv import add_log_options

    add_log_options(p)  # --log TARGET=PATH, --no-logs (docs/logs.md)
    fleet = p.add_argument_group("fleet mode (read a Prometheus-compatible server)")
    fleet.add_argument("--prometheus", default=None, metavar="URL",
                       help="Prometheus / VictoriaMetrics / Thanos / Mimir URL, path prefix "
                       "allowed; shows every engine it scrapes")
    fleet.add_argument("--match", default=None, metavar="SELECTOR",
                       help='label matchers added to every query: namespace=~"prod-.*"')
    fleet.add_argument("--group-by", default=None, metavar="LABELS",
                       help="labels that make a row (default instance, or namespace,pod)")
    fleet.add_argument("--at", default=None, metavar="TIME",
                       help="evaluate at a past time: unix seconds, RFC 3339 or -2h")
    fleet.add_argument("--prometheus-token-file", default=None, metavar="FILE",
                       help="bearer token file (re-read when it changes)")
    fleet.add_argument("--prometheus-user", default=None, metavar="USER",
                       help="basic-auth user (password from --prometheus-password-file)")
    fleet.add_argument("--prometheus-password-file", default=None, metavar="FILE")
    fleet.add_argument("--prometheus-header", action="append", default=None,
                       metavar="NAME:VALUE", help="extra header (X-Scope-OrgID:tenant); repeat")
    fleet.add_argument("--prometheus-param", action="append", default=None,
                       metavar="NAME=VALUE", help="extra query parameter (dedup=true); repeat")
    fleet.add_argument("--prometheus-ca-file", default=None, metavar="FILE",
                       help="CA bundle for the server's TLS certificate")
    p.add_argument("--gpu-peak", default=None, metavar="GBPS,TFLOPS",
                   help="the GPU peak MBU/MFU divide by (memory GB/s, dense TFLOP/s; e.g. "
                   "3350,989 for an H100 SXM) instead of the table's row (docs/gpu.md)")
    p.add_argument("--capacity", default=None, metavar="FILE",
                   help="capacity profiles from this probe/bake-off report or saved profile, "
                   "instead of the saved ones (docs/capacity.md)")
    p.add_argument("--record", default=None, metavar="FILE", help="record while the TUI runs")
    p.add_argument("--retention", type=_POSITIVE, default=None, metavar="HOURS",
                   help="with --record: keep at most this many hours")
    p.add_argument("--max-size", default=None, metavar="SIZE",
                   help="with --record: cap the recording size (e.g. 200M)")
    from llmtop.cli.otlp import add_otlp_options

    add_otlp_options(p)  # --otlp-listen: the engines' request spans (docs/requests.md)
    return p


def run_monitor(args: argparse.Namespace) -> int:
    """Run the monitor (TUI, ``--once``, fleet mode) for parsed ``args``."""
    from llmtop.settings import build_config

    config = build_config(args)
    if config.prometheus is not None:  # fleet mode: rows from a Prometheus-compatible server
        from llmtop.cli.fleet import run_fleet_once, tui_config

        if args.targets or args.demo:
            from llmtop.errors import ConfigError

            what = "TARGET" if args.targets else "--demo"
            raise ConfigError(f"{what} cannot be used with --prometheus (fleet mode reads the "
                              "server)")
        recorder = None
        if args.record:  # each refresh's raw answers (llmtop/fleet/record.py)
            from llmtop.cli.fleet import fleet_recorder
            from llmtop.record.recorder import parse_size

            recorder = fleet_recorder(
                config, args.record, max_bytes=parse_size(args.max_size),
                retention_s=args.retention * 3600 if args.retention is not None else None)
        if args.once:
            return run_fleet_once(config, as_json=args.json, recorder=recorder)
        from llmtop.cli.fleet import tui_monitor
        from llmtop.ui.app import run_fleet

        mon = tui_monitor(config, recorder)
        try:
            return run_fleet(mon, tui_config(config), theme=getattr(args, "theme", None))
        finally:
            if recorder is not None:
                recorder.close()
    demo = None
    try:
        from llmtop.cli.otlp import listen_for_demo, start_demo_sending, start_receiver

        listen_for_demo(args)  # the TUI on --demo: the demo's spans on a free loopback port
        spans = start_receiver(args)  # --otlp-listen (a bad address stops here)
        if args.demo:
            demo = start_demo_sending(args, config, spans)
            config = demo.apply(config)
        if args.once:
            from llmtop.once import run_once

            def make_monitor(config: Config) -> object:
                return _recording_monitor(config, demo, args, spans)

            window = args.window if args.window is not None else 1.0
            return run_once(config, window_s=window, as_json=args.json, demo=demo,
                            make_monitor=make_monitor if args.record or spans else None)
        # the first scrapes start here and run while Textual is imported (ui.live is free
        # of it): the first frame can show data
        from llmtop.ui.live import make_source

        prepared = make_source(config, demo=demo, record_path=args.record, args=args,
                               prefetch=True, receiver=spans)
        from llmtop.ui.app import run_tui

        return run_tui(config, demo=demo, record_path=args.record, args=args,
                       prepared=prepared)
    finally:
        if demo is not None:
            demo.stop()


def _recording_monitor(config: Config, demo: object, args: argparse.Namespace,
                       receiver: Any = None) -> object:
    """A Monitor for ``--once`` on ``config``'s targets (found already: ``run_once``) that
    also records to ``--record FILE`` when asked, with the span receiver (``--otlp-listen``)
    when there is one."""
    from llmtop.monitor import Monitor
    from llmtop.record.live import attach
    from llmtop.record.recorder import parse_size

    if not args.record:
        return Monitor.from_config(config, demo, receiver=receiver)
    retention = args.retention * 3600 if args.retention is not None else None
    return attach(Monitor.from_config(config, demo, receiver=receiver), args.record, config,
                  retention_s=retention, max_bytes=parse_size(args.max_size))


def run(argv: Sequence[str]) -> int:
    """Parse ``argv`` (options anywhere) and run the monitor."""
    from llmtop.cli.argv import glue_dash_values

    return run_monitor(build_parser().parse_intermixed_args(glue_dash_values(list(argv))))
