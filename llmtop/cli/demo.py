"""``llmtop demo serve``: run the simulated engines headless until Ctrl-C / SIGTERM.

``llmtop demo fleet``: demo engines scraped by a real Prometheus on loopback, then the fleet
view (:mod:`llmtop.demo.fleet`).

Binds 127.0.0.1 only. Prints each engine's metrics URL, OpenAI base URL and the GPU JSON
URL. ``--ready-file F`` writes the same information as JSON once every port listens (the
launcher waits for it); ``--parent-pid P`` exits when that process goes away.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``llmtop demo`` argument parser."""
    p = argparse.ArgumentParser(prog="llmtop demo",
                                description="Simulated vLLM, SGLang and Triton/TRT-LLM engines.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve the demo engines on 127.0.0.1 until Ctrl-C")
    s.add_argument("--engines", default="vllm,sglang,triton",
                   help="comma-separated: vllm,sglang,triton (default all three)")
    s.add_argument("--ports", default="",
                   help="comma-separated ports, one per engine (0 or missing = a free port)")
    s.add_argument("--gpu-port", type=int, default=0, help="port of the GPU JSON endpoint")
    s.add_argument("--scenario", default=None,
                   help="faults: restart | down | garbage | slow; load: kv-pressure | "
                   "queue-spike | prefix-thrash; diagnosis, a healthy baseline (30 s or "
                   "$LLMTOP_DEMO_BASELINE_S) then the anomaly: queueing | long-prompts | "
                   "prefix-miss | decode-slowdown | gpu-throttle | errors | imbalance | "
                   "spec-decode-drop | gpu-bound | gpu-idle; serving stacks (a simulated vLLM "
                   "router in front of demo vLLMs): stack | routing | routing-down | "
                   "pd-balance | kv-transfer | stuck (docs/demo.md)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 inside a network "
                   "namespace or container, as an engine there would)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--profile", default=None,
                   help="h100-llama3-8b (default; a scenario may name its own) | "
                   "h100-llama3-8b-tuned | h100-llama3-8b-eager | a100-llama3-8b")
    s.add_argument("--no-background", action="store_true",
                   help="no background traffic (engines idle until requests arrive)")
    s.add_argument("--fault-after", type=float, default=10.0, metavar="S",
                   help="restart/down scenarios: first fault after S seconds (default 10)")
    s.add_argument("--fault-every", type=float, default=30.0, metavar="S",
                   help="restart/down scenarios: repeat every S seconds (default 30)")
    s.add_argument("--max-num-seqs", type=int, default=None, metavar="N",
                   help="seat limit: at most N requests running (vLLM --max-num-seqs)")
    s.add_argument("--max-num-batched-tokens", type=int, default=None, metavar="N",
                   help="token budget of one step (vLLM --max-num-batched-tokens)")
    s.add_argument("--kv-tokens", type=int, default=None, metavar="N",
                   help="KV cache capacity in tokens (rounded up to whole blocks); full, it "
                   "queues new requests and preempts running ones")
    s.add_argument("--max-model-len", type=int, default=None, metavar="N",
                   help="context length (vLLM --max-model-len); the KV cache must hold one "
                   "request this long or the engine refuses to start, as vLLM does")
    s.add_argument("--gpu-memory-utilization", type=float, default=None, metavar="F",
                   help="share of the simulated GPU's memory for weights + KV cache (vLLM's "
                   "flag; sizes the KV cache when --kv-tokens is not given); more than "
                   "is free refuses to start, as vLLM does")
    s.add_argument("--gpu-memory-used-gib", type=float, default=0.5, metavar="G",
                   help="GiB of the simulated GPU held by other processes at start "
                   "(default 0.5: the CUDA context)")
    s.add_argument("--otlp-traces-endpoint", default=None, metavar="URL",
                   help="send each finished request's span here, as vLLM does (OTLP/HTTP "
                   "protobuf, e.g. http://127.0.0.1:4318/v1/traces; docs/requests.md)")
    s.add_argument("--log-dir", default=None, metavar="DIR",
                   help="each engine writes its log to DIR/<engine>-<port>.log in its real "
                   "engine's format (docs/demo.md)")
    s.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)
    s.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    s.add_argument("--quiet", action="store_true", help="do not print the URLs")
    _add_fleet_parser(sub)
    return p


def _add_fleet_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    f = sub.add_parser("fleet", help="demo engines scraped by a real Prometheus on 127.0.0.1, "
                       "then the fleet view (other options go to llmtop, e.g. --once --json)")
    f.add_argument("--engines", type=int, default=8, metavar="N",
                   help="number of demo engines: vLLM and SGLang, two models, one in trouble "
                   "(default 8)")
    f.add_argument("--backend", choices=("prometheus", "victoriametrics"), default="prometheus",
                   help="the server that scrapes them (default prometheus)")
    f.add_argument("--scrape-interval", type=float, default=2.0, metavar="S",
                   help="scrape interval in seconds (default 2)")
    f.add_argument("--down", type=int, default=1, metavar="N",
                   help="dead targets to add, shown as down (default 1)")
    f.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    f.add_argument("--serve", action="store_true",
                   help="do not open the fleet view: print the URL and serve until Ctrl-C")
    f.add_argument("--yes", action="store_true",
                   help="without a Prometheus binary, fetch Debian's packages into "
                   "~/.cache/llmtop/fleet-bin without asking")


def _fleet(argv: list[str], parser: argparse.ArgumentParser) -> int:
    """``llmtop demo fleet [options] [llmtop options]``."""
    import importlib.util
    import time

    from llmtop.demo.fleet import start_demo_fleet
    from llmtop.errors import LlmtopError

    args, rest = parser.parse_known_args(argv)
    from llmtop.children import install_exit_handlers

    install_exit_handlers()  # SIGHUP / SIGTERM: stop the server and engines, then exit
    if not _ensure_server_binary(args.backend, args.yes):
        return 2
    print(f"llmtop demo fleet: starting {max(1, args.engines)} demo engines and {args.backend} "
          "on 127.0.0.1, then waiting for its first scrapes…", file=sys.stderr, flush=True)
    try:
        running = start_demo_fleet(max(1, args.engines), backend=args.backend,
                                   scrape_interval_s=args.scrape_interval,
                                   down=max(0, args.down), port=args.port)
    except LlmtopError as exc:
        print(f"llmtop demo fleet: {exc}", file=sys.stderr)
        return 2
    try:
        live = [e for e in running.fleet.engines if not e.down and e.job != "dcgm"]
        print(f"llmtop demo fleet: {args.backend} at {running.url} scraping {len(live)} demo "
              f"engines every {args.scrape_interval:g} s (+ {len(running.fleet.gpu_urls)} DCGM "
              f"exporters, {args.down} dead target); data in {running.workdir}", file=sys.stderr)
        for e in running.fleet.engines:
            what = ("down" if e.down else "in trouble" if e.trouble
                    else "DCGM exporter" if e.job == "dcgm" else (e.scenario or ""))
            print(f"  {e.job:<7} {e.instance:<16} {e.model or '-':<34} {what}", file=sys.stderr)
        from llmtop.cli.monitor import build_parser as llmtop_parser

        has_view = (importlib.util.find_spec("llmtop.fleet") is not None
                    and "--prometheus" in llmtop_parser()._option_string_actions)
        if args.serve or not has_view:
            why = "" if has_view else " (this build has no fleet view yet)"
            print(f"Open the fleet view with: llmtop --prometheus {running.url}{why}\n"
                  "Ctrl-C to stop.", file=sys.stderr, flush=True)
            while running.server.alive():
                time.sleep(1.0)
            print(f"llmtop demo fleet: {args.backend} exited: {running.server.log_tail()}",
                  file=sys.stderr)
            return 1
        from llmtop.cli.monitor import run as run_monitor

        # The demo's VictoriaMetrics hides only the last 1 s (-search.latencyOffset=1s); say so
        # per query, or fleet mode assumes VictoriaMetrics's default 30 s and looks back that far.
        vm = ["--prometheus-param", "latency_offset=1s"] if args.backend != "prometheus" else []
        return run_monitor(["--prometheus", running.url, *vm, *rest])
    except KeyboardInterrupt:
        return 0
    finally:
        running.stop()


def _ensure_server_binary(backend: str, yes: bool) -> bool:
    """True when the fleet's server binary is there, or fetched now (asked first on a
    terminal, or told ``--yes``); else print one exact way to get it and return False."""
    from llmtop.demo import fleet, fleet_bins
    from llmtop.errors import LlmtopError

    name = "prometheus" if backend == "prometheus" else "victoria-metrics"
    if fleet.find_binary(name):
        return True
    why = fleet_bins.blocker()
    if why:
        print(f"llmtop demo fleet: no {name} binary, and llmtop cannot fetch one here ({why}). "
              f"Install it (`brew install prometheus victoriametrics`, or your system's "
              f"package) or point {fleet.BIN_ENV[name]} at it.", file=sys.stderr)
        return False
    dest = fleet_bins.cache_dir()
    if not yes:
        ask = (f"llmtop demo fleet: no {name} binary. Fetch Debian's prometheus and "
               f"victoria-metrics packages ({fleet_bins.SIZE_HINT}) into {dest}? [y/N] ")
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            print(f"llmtop demo fleet: no {name} binary: {fleet.INSTALL_HINT}", file=sys.stderr)
            return False
        print(ask, end="", file=sys.stderr, flush=True)
        try:
            answer = sys.stdin.readline().strip().lower()
        except (KeyboardInterrupt, EOFError):
            answer = ""
        if answer not in ("y", "yes"):
            print(f"llmtop demo fleet: not fetched. {fleet.INSTALL_HINT}", file=sys.stderr)
            return False
    try:
        fleet_bins.fetch(dest, progress=lambda line: print(f"llmtop demo fleet: {line}",
                                                           file=sys.stderr, flush=True))
    except LlmtopError as exc:
        print(f"llmtop demo fleet: {exc}", file=sys.stderr)
        return False
    return fleet.find_binary(name) is not None


def _write_ready(path: str, info: dict[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.replace(tmp, path)


def _settings(args: argparse.Namespace) -> dict[str, object]:
    """The scheduler knobs given on the command line, as ``EngineSettings`` changes."""
    out: dict[str, object] = {}
    for key in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization",
                "kv_tokens", "max_model_len"):
        if getattr(args, key) is not None:
            out[key] = getattr(args, key)
    return out


async def _serve(args: argparse.Namespace) -> int:
    from llmtop.demo.server import DemoServer

    engines = [x.strip() for x in args.engines.split(",") if x.strip()]
    ports = [int(x) for x in args.ports.split(",") if x.strip()] if args.ports else []
    url = args.otlp_traces_endpoint
    if url is not None and not url.startswith(("http://", "https://")):
        print(f"llmtop demo: --otlp-traces-endpoint {url!r}: give an http(s):// URL (OTLP/HTTP, "
              "e.g. http://127.0.0.1:4318/v1/traces)", file=sys.stderr, flush=True)
        return 2
    if args.log_dir:
        try:
            os.makedirs(args.log_dir, exist_ok=True)
        except OSError as exc:
            print(f"llmtop demo: --log-dir {args.log_dir}: {exc.strerror or exc}",
                  file=sys.stderr, flush=True)
            return 2
    server = DemoServer(engines, ports, scenario=args.scenario, seed=args.seed,
                        background=not args.no_background, profile=args.profile,
                        fault_after=args.fault_after, fault_every=args.fault_every,
                        gpu_port=args.gpu_port, settings=_settings(args),
                        gpu_used_gib=args.gpu_memory_used_gib, host=args.host,
                        otlp_endpoint=args.otlp_traces_endpoint, log_dir=args.log_dir)
    try:
        await server.start()
    except ValueError as exc:  # the engine refuses these settings, as the real one does
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
        await server.stop()
        return 1
    info = server.info()
    if args.ready_file:
        _write_ready(args.ready_file, info)
    if not args.quiet:
        print(f"llmtop demo: scenario {info['scenario']}, pid {info['pid']}")
        for e in info["engines"]:
            print(f"  {e['target']:<26} metrics {e['metrics_url']}  OpenAI {e['api_base']}  "
                  f"model {e['model']}" + (f"  log {e['log']}" if e.get("log") else ""))
        r = info.get("router")
        if r:
            print(f"  {r['target']:<26} metrics {r['metrics_url']}  OpenAI {r['base_url']}/v1  "
                  f"{'P/D' if r['pd'] else r['policy']} over "
                  + ", ".join(f"{b['url']} ({b['role']})" for b in r["backends"]))
        print(f"  GPUs (JSON)                {info['gpu_url']}")
        if info.get("otlp_traces_endpoint"):
            print(f"  request spans (vLLM)       {info['otlp_traces_endpoint']}")
        print("Ctrl-C to stop.", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        while not stop.is_set():
            if args.parent_pid and os.getppid() != args.parent_pid:
                break
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
    finally:
        await server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``llmtop demo ...``."""
    from llmtop.cli.argv import subcommand_first, value_options

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = subcommand_first(list(sys.argv[1:] if argv is None else argv), sub.choices,
                             value_options(sub.choices.values()))
    if words[:1] == ["fleet"]:
        return _fleet(words[1:], sub.choices["fleet"])
    args = parser.parse_args(words)
    from llmtop.demo.scenarios import SCENARIOS

    if args.scenario not in (None, "", "none", "default") and args.scenario not in SCENARIOS:
        print(f"llmtop demo: unknown scenario {args.scenario!r} (choose from "
              f"{', '.join(s for s in SCENARIOS if s != 'default')})", file=sys.stderr)
        return 2
    try:
        import uvloop  # optional

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        return runner(_serve(args))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"llmtop demo: {exc}", file=sys.stderr)
        return 2
