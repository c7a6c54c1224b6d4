"""``llmtop demo serve``: run the simulated engines headless until Ctrl-C / SIGTERM.

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
                   help="kv-pressure | queue-spike | prefix-thrash | restart | down | garbage "
                   "| slow")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--profile", default=None, help="h100-llama3-8b (default) | a100-llama3-8b")
    s.add_argument("--no-background", action="store_true",
                   help="no background traffic (engines idle until requests arrive)")
    s.add_argument("--fault-after", type=float, default=10.0, metavar="S",
                   help="restart/down scenarios: first fault after S seconds (default 10)")
    s.add_argument("--fault-every", type=float, default=30.0, metavar="S",
                   help="restart/down scenarios: repeat every S seconds (default 30)")
    s.add_argument("--ready-file", default=None, help=argparse.SUPPRESS)
    s.add_argument("--parent-pid", type=int, default=None, help=argparse.SUPPRESS)
    s.add_argument("--quiet", action="store_true", help="do not print the URLs")
    return p


def _write_ready(path: str, info: dict[str, object]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.replace(tmp, path)


async def _serve(args: argparse.Namespace) -> int:
    from llmtop.demo.server import DemoServer

    engines = [x.strip() for x in args.engines.split(",") if x.strip()]
    ports = [int(x) for x in args.ports.split(",") if x.strip()] if args.ports else []
    server = DemoServer(engines, ports, scenario=args.scenario, seed=args.seed,
                        background=not args.no_background, profile=args.profile,
                        fault_after=args.fault_after, fault_every=args.fault_every,
                        gpu_port=args.gpu_port)
    await server.start()
    info = server.info()
    if args.ready_file:
        _write_ready(args.ready_file, info)
    if not args.quiet:
        print(f"llmtop demo: scenario {info['scenario']}, pid {info['pid']}")
        for e in info["engines"]:
            print(f"  {e['target']:<26} metrics {e['metrics_url']}  OpenAI {e['api_base']}  "
                  f"model {e['model']}")
        print(f"  GPUs (JSON)                {info['gpu_url']}")
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
    args = parser.parse_args(subcommand_first(list(sys.argv[1:] if argv is None else argv),
                                              sub.choices, value_options(sub.choices.values())))
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
