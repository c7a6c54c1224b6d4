"""What the TUI costs per refresh watching one router of 8 backends, beside 8 plain engines.

Starts one simulated serving stack (``llmtop/demo/stack.py``: a vLLM router, round robin, in
front of 8 demo vLLM engines, 16 requests in flight) in a separate process, then runs the
llmtop TUI in a pseudo-terminal (80x24, 1 s refresh) twice per round, alternating:

* ``engines``: the 8 engines given as 8 targets (no router);
* ``router``: the router's /metrics alone; llmtop brings its backends (issue 42), so it shows
  the router and the same 8 engines.

Both watch the same servers under the same traffic, so the difference is what the router
costs. Prints per run: CPU ms per refresh and % of one core over the measured window (after
``--warmup`` s of steady state), RSS. A tree that does not follow a router's backends (no
``routers`` in ``llmtop --once --json ROUTER``) cannot be compared: its router runs are
reported as not comparable.

    .venv/bin/python benchmarks/stack_cost.py [--seconds 30] [--rounds 2] [--backends 8]
        [--baseline-tree PATH]

``--baseline-tree PATH`` (a checkout of an older commit, e.g. ``git worktree add /tmp/base
b5f1f32``, the tree before router support) adds a third run per round: the 8 engines watched
by that tree's llmtop (its package first on ``PYTHONPATH``, this venv's dependencies), the
"8 engines did" of issue 42.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tui_cost import PY, ROOT, cpu_seconds, drain, rss_mb

SERVER = r"""
import asyncio, json, signal, sys
from llmtop.demo import scenarios
from llmtop.demo.scenarios import Scenario
from llmtop.demo.server import DemoServer
from llmtop.demo.stack_scenarios import StackBackend, StackSpec
n = int(sys.argv[2])
scenarios.SCENARIOS["bench-stack"] = Scenario(
    "bench-stack", stack=StackSpec(tuple(StackBackend() for _ in range(n)), clients=2.0 * n))
async def main():
    s = DemoServer(scenario="bench-stack")
    await s.start()
    with open(sys.argv[1] + ".tmp", "w") as f:
        json.dump(s.info(), f)
    import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await s.stop()
asyncio.run(main())
"""

DRIVER = r"""
import json, sys
from llmtop.config import Config, Target
from llmtop.ui.app import run_tui
urls = json.loads(sys.argv[1])
targets = tuple(Target(name=u.split("//")[1], base_url=u, port=int(u.rsplit(":", 1)[1]))
                for u in urls)
sys.exit(run_tui(Config(targets=targets, interval_s=float(sys.argv[2]), discover=False)))
"""


def start_stack(n: int) -> tuple[subprocess.Popen, dict]:
    ready = Path(tempfile.mkdtemp()) / "ready.json"
    proc = subprocess.Popen([PY, "-c", SERVER, str(ready), str(n)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the demo stack did not start")
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())


def follows_router(router_url: str) -> tuple[bool, int]:
    """Whether this tree lists the router and its backends from the router's URL alone."""
    out = subprocess.run([PY, "-m", "llmtop", "--once", "--json", router_url + "/metrics"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    try:
        snap = json.loads(out.stdout)
    except ValueError:
        return False, 0
    return bool(snap.get("routers")), len(snap.get("engines", []))


def measure(urls: list[str], marker: bytes, args: argparse.Namespace,
            tree: str | None = None) -> dict:
    """CPU per refresh of one TUI (this tree's, or ``tree``'s llmtop) watching ``urls``."""
    cols, rows = (int(x) for x in args.size.split("x"))
    env = dict(os.environ, TERM="xterm-256color", TEXTUAL_ANIMATIONS="none",
               COLUMNS=str(cols), LINES=str(rows))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    if tree is not None:
        env["PYTHONPATH"] = tree
    tui = subprocess.Popen([PY, "-c", DRIVER, json.dumps(urls), str(args.interval)],
                           stdin=slave, stdout=slave, stderr=slave, cwd=tree or ROOT, env=env,
                           start_new_session=True)
    os.close(slave)
    try:
        seen, t0 = b"", time.monotonic()
        while marker not in seen and time.monotonic() - t0 < 30:
            seen = (seen + drain(master, 0.05))[-200_000:]
        end = time.monotonic() + args.warmup
        while time.monotonic() < end:
            drain(master, 0.05)
        c0, w0 = cpu_seconds(tui.pid), time.monotonic()
        end = w0 + args.seconds
        while time.monotonic() < end:
            drain(master, 0.05)
        cpu, wall = cpu_seconds(tui.pid) - c0, time.monotonic() - w0
        rss = rss_mb(tui.pid)
    finally:
        os.killpg(tui.pid, signal.SIGTERM)
        try:
            tui.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(tui.pid, signal.SIGKILL)
        os.close(master)
    refreshes = wall / args.interval
    return {"ms_per_refresh": 1000 * cpu / refreshes, "cpu_pct": 100 * cpu / wall,
            "rss_mb": rss}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--backends", type=int, default=8)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--baseline-tree", default=None,
                    help="an older checkout: its llmtop watches the 8 engines too")
    args = ap.parse_args()
    demo, info = start_stack(args.backends)
    try:
        router = info["router"]["base_url"]
        engines = [e["base_url"] for e in info["engines"]]
        ok, rows = follows_router(router)
        print(f"stack: router {router}, {len(engines)} backends; this tree "
              + (f"follows the router ({rows} engine rows from its URL alone)" if ok else
                 "does not follow a router's backends: router runs are not comparable"))
        for rnd in range(args.rounds):
            modes = ("engines", "router") + (("base",) if args.baseline_tree else ())
            for mode in modes:
                urls = [router] if mode == "router" else engines
                port = urls[0].rsplit(":", 1)[1]
                tree = args.baseline_tree if mode == "base" else None
                r = measure(urls, f":{port}".encode(), args, tree)
                note = ("" if mode != "router" or ok else "  (not comparable: no backends)")
                if mode == "base":
                    note = f"  (8 engines, llmtop of {args.baseline_tree})"
                print(f"round {rnd + 1} {mode:<8} {r['ms_per_refresh']:6.1f} ms CPU per "
                      f"refresh  {r['cpu_pct']:5.2f} % of one core  RSS {r['rss_mb']:.0f} MB"
                      f"{note}", flush=True)
    finally:
        demo.send_signal(signal.SIGTERM)
        try:
            demo.wait(timeout=10)
        except subprocess.TimeoutExpired:
            demo.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
