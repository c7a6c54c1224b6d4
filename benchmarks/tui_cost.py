"""What the TUI costs on the box it watches: CPU % of one core, RSS, time to first data.

Starts ``llmtop demo serve`` (4 engines, one demo GPU each) as a separate process, then runs
the llmtop TUI in a pseudo-terminal (80x24 by default) monitoring those targets and the first
``--gpu-count`` (2) demo GPUs at a 1 s interval, draining the terminal output like a real
terminal would.

    .venv/bin/python benchmarks/tui_cost.py [--seconds 60] [--size 80x24] [--interval 1]
                                            [--gpus demo|nvml] [--gpu-count 2]
                                            [--engines vllm] [--tree DIR]

One target as in ``benchmarks/peers.py`` (a demo vLLM, 120x40, no GPUs where NVML is absent):
``--engines vllm --size 120x40 --gpus nvml``. ``--tree DIR`` runs the TUI from another
source tree (an older commit) for interleaved A/B runs on the shared machine.

Prints: time to first data on screen (spawn -> first engine row drawn), CPU % of one core
averaged over the measured window (steady state: it opens ``--warmup`` seconds after first
data; start-up CPU is printed on its own), and RSS at the end. Targets (issue 5):
CPU <= 2 %, first data <= 1.0 s, RSS <= 100 MB. The machine is shared: numbers are noisy.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CLK = os.sysconf("SC_CLK_TCK")

DRIVER = r"""
import json, sys
from types import SimpleNamespace
from llmtop.config import Config, Target
from llmtop.ui.app import run_tui
info = json.loads(sys.argv[1])
from dataclasses import fields
logs = "log" in {f.name for f in fields(Target)}  # a tree before the logs follows none
targets = tuple(Target(name=e["target"], base_url=e["base_url"], engine=e["engine"],
                       port=e["port"], **({"log": e.get("log")} if logs else {}))
                for e in info["engines"])
config = Config(targets=targets, interval_s=float(sys.argv[2]), discover=False)
demo = SimpleNamespace(gpu_url=info["gpu_url"]) if sys.argv[3] == "demo" else None
sys.exit(run_tui(config, demo=demo))
"""

FAKE_DRIVER = r"""
import sys
from dataclasses import replace
from llmtop.config import Config
from llmtop.ui.app import LlmtopApp, _run
from llmtop.ui.fake import FakeSource, demo_snapshot
changing = sys.argv[2] == "changing"
base = demo_snapshot("ok")

def snap(n):
    if not changing:
        return base
    k = 1 + (n % 7) / 10
    engines = [replace(r, running=(r.running or 0) + n % 5, waiting=n % 4,
                       kv_cache_usage=((r.kv_cache_usage or 0.3) * k) % 1,
                       generation_tokens_per_s=(r.generation_tokens_per_s or 500) * k,
                       requests_per_s=(r.requests_per_s or 1) * k,
                       preemptions_per_s=n % 3, errors_per_s=(n % 2) / 10,
                       prefix_hit_rate=((r.prefix_hit_rate or 0.5) * k) % 1,
                       ttft_s=replace(r.ttft_s, p95=r.ttft_s.p95 * k) if r.ttft_s else None,
                       itl_s=replace(r.itl_s, p95=r.itl_s.p95 * k) if r.itl_s else None)
               for r in base.engines]
    gpus = [replace(g, util=(g.util * k) % 1, power_w=g.power_w * k, temp_c=g.temp_c + n % 3)
            for g in base.gpus]
    return replace(base, time=base.time + n, engines=engines, gpus=gpus)

src = FakeSource(snapshots=snap)
sys.exit(_run(LlmtopApp(src, Config(interval_s=float(sys.argv[1])))))
"""


def cpu_seconds(pid: int) -> float:
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of ``pid`` so far (all threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK, int(fields[12]) / CLK


def wakeups(pid: int) -> int:
    """Context switches of every thread of ``pid`` so far (each is a sleep/wake or a
    preemption): a monitor that wakes often pays cold caches each time."""
    return sum(sw for _, sw in threads(pid).values())


def threads(pid: int) -> dict[int, tuple[float, int]]:
    """Per thread of ``pid``: CPU seconds and context switches so far."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            f = (task / "stat").read_text().rsplit(")", 1)[1].split()
            sw = sum(int(line.split()[1]) for line in (task / "status").read_text().splitlines()
                     if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")))
        except OSError:
            continue
        out[int(task.name)] = ((int(f[11]) + int(f[12])) / CLK, sw)
    return out


def run_ns(pid: int) -> tuple[int, int] | None:
    """Nanoseconds on CPU so far, all threads and the main thread (``schedstat``: finer
    than the 10 ms ticks of ``stat``); None where the kernel does not keep it."""
    try:
        total = main = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                ns = int((task / "schedstat").read_text().split()[0])
            except OSError:
                continue
            total += ns
            if task.name == str(pid):
                main = ns
        return total, main
    except (OSError, ValueError):
        return None


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_demo(engines: str) -> tuple[subprocess.Popen, dict]:
    ready = Path(tempfile.mkdtemp()) / "ready.json"
    # each engine writes its log there, and the TUI follows it, as llmtop --demo does
    proc = subprocess.Popen(
        [PY, "-m", "llmtop", "demo", "serve", "--engines", engines, "--quiet",
         "--ready-file", str(ready), "--log-dir", str(ready.parent)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("demo serve did not start")
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())


def gpu_count(args: argparse.Namespace, info: dict) -> str:
    """How many GPUs the TUI watched, in words."""
    if args.fake:
        return "2 fake GPUs"
    if args.prometheus:
        return "a fleet's DCGM GPUs, if any"
    if args.gpus == "nvml":
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                return f"{pynvml.nvmlDeviceGetCount()} NVML GPU(s)"
            finally:
                pynvml.nvmlShutdown()
        except Exception as exc:
            return f"NVML GPUs ({type(exc).__name__})"
    try:
        with urllib.request.urlopen(info["gpu_url"], timeout=2) as resp:
            return f"{len(json.load(resp)['gpus'])} demo GPUs"
    except Exception:
        return "demo GPUs"


def drain(fd: int, timeout: float) -> bytes:
    out = b""
    r, _, _ = select.select([fd], [], [], timeout)
    while r:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        r, _, _ = select.select([fd], [], [], 0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--size", default="80x24")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--engines", default="vllm,vllm,sglang,triton")
    ap.add_argument("--fake", choices=("changing", "static"),
                    help="UI alone: a FakeSource (3 engines, 2 GPUs) whose every cell changes "
                         "each tick, or never changes; no demo servers")
    ap.add_argument("--gpu-count", type=int, default=2, metavar="N",
                    help="demo GPUs the TUI watches (default 2, as in the target; the demo "
                         "has one per engine, this keeps the first N)")
    ap.add_argument("--gpus", choices=("demo", "nvml"), default="demo",
                    help="GPU source: the demo's simulated GPUs over HTTP (default), or the "
                         "local NVIDIA driver (NVML) on a GPU machine")
    ap.add_argument("--warmup", type=float, default=5.0, metavar="S",
                    help="seconds after first data before the CPU window opens (default 5): "
                         "the window measures steady state; start-up CPU is printed apart")
    ap.add_argument("--rss-every", type=float, metavar="S",
                    help="also print elapsed time, CPU %% so far and RSS every S seconds "
                         "(to watch memory grow over an hour of history)")
    ap.add_argument("--threads", action="store_true",
                    help="also print each thread's CPU %% and context switches/s")
    ap.add_argument("--prometheus", metavar="URL",
                    help="the fleet TUI on this server instead (e.g. the 500 instances of "
                         "benchmarks/fleet.py --hold); --interval is then its refresh")
    ap.add_argument("--tree", metavar="DIR",
                    help="run the TUI from another llmtop source tree (e.g. an older commit: "
                         "git archive REV | tar -x -C DIR), for interleaved A/B runs")
    ap.add_argument("--py-spy", metavar="OUT",
                    help="also record a py-spy profile (collapsed stacks) of the TUI process "
                         "over the measured window into OUT; needs py-spy on PATH")
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))

    if args.prometheus:
        demo, info = None, {"engines": []}
        argv = [PY, "-m", "llmtop", "--prometheus", args.prometheus, "--interval",
                f"{args.interval:g}", "--timeout", "60"]
    elif args.fake:
        demo, info = None, {"engines": [{"port": p} for p in (8000, 30000, 8002)]}
        argv = [PY, "-c", FAKE_DRIVER, str(args.interval), args.fake]
    else:
        demo, info = start_demo(args.engines)
        info["gpu_url"] += f"?limit={args.gpu_count}"
        argv = [PY, "-c", DRIVER, json.dumps(info), str(args.interval), args.gpus]
    marker = (b"total (" if args.prometheus  # a model's total row: the fleet table is up
              else f":{info['engines'][0]['port']} ".encode())
    env = dict(os.environ, TERM="xterm-256color", TEXTUAL_ANIMATIONS="none", COLUMNS=str(cols),
               LINES=str(rows))
    cwd = ROOT
    if args.tree:
        cwd = Path(args.tree).resolve()
        env["PYTHONPATH"] = str(cwd)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    t_spawn = time.monotonic()
    tui = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env,
                           start_new_session=True)
    os.close(slave)
    try:
        seen = b""
        first_data = None
        while first_data is None and time.monotonic() - t_spawn < 30:
            seen = (seen + drain(master, 0.01))[-200_000:]
            if marker in seen and b"first scrape" not in seen[-4000:]:
                first_data = time.monotonic() - t_spawn
        if first_data is None:
            raise SystemExit("no data on screen within 30 s")
        cpu_first = cpu_seconds(tui.pid)
        warm_end = time.monotonic() + args.warmup
        while time.monotonic() < warm_end:
            drain(master, 0.2)
        cpu_warm = cpu_seconds(tui.pid)
        spy = None
        if args.py_spy:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(tui.pid), "--format", "raw", "--rate", "1000",
                 "--duration", str(int(args.seconds)), "--output", args.py_spy, "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ns0 = run_ns(tui.pid)
        cpu0, t0, sw0 = cpu_seconds(tui.pid), time.monotonic(), wakeups(tui.pid)
        th0, us0 = threads(tui.pid), cpu_split(tui.pid)
        next_report = t0 + (args.rss_every or float("inf"))
        while time.monotonic() - t0 < args.seconds:
            drain(master, 0.2)
            if time.monotonic() >= next_report:
                next_report += args.rss_every
                el = time.monotonic() - t0
                print(f"  {el:6.0f} s  CPU {(cpu_seconds(tui.pid) - cpu0) / el * 100:5.2f} %  "
                      f"RSS {rss_mb(tui.pid):6.1f} MB", flush=True)
            if tui.poll() is not None:
                raise SystemExit(f"llmtop exited early: {tui.returncode}")
        cpu1, t1, sw1 = cpu_seconds(tui.pid), time.monotonic(), wakeups(tui.pid)
        ns1 = run_ns(tui.pid)
        th1, us1 = threads(tui.pid), cpu_split(tui.pid)
        rss = rss_mb(tui.pid)
        if spy is not None:
            spy.wait(30)
        n_gpus = gpu_count(args, info)
    finally:
        if tui.poll() is None:
            os.killpg(tui.pid, signal.SIGTERM)
            try:
                tui.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(tui.pid, signal.SIGKILL)
        if demo is not None:
            demo.terminate()
            demo.wait(10)
        os.close(master)
    cpu_pct = (cpu1 - cpu0) / (t1 - t0) * 100
    what = f"UI alone, FakeSource {args.fake}" if args.fake else args.engines
    if args.prometheus:
        what = f"fleet mode, --prometheus {args.prometheus}"
    print(f"llmtop TUI cost: {len(info['engines'])} targets ({what}), {n_gpus}, "
          f"interval {args.interval:g}s, {cols}x{rows}, measured {t1 - t0:.0f}s")
    print(f"  time to first data on screen: {first_data:.2f} s   (target <= 1.0 s)")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("    (PYTHONDONTWRITEBYTECODE is set: llmtop's modules are compiled from source at "
              "every start, ~0.1 s of this; an installed llmtop has its .pyc files)")
    print(f"  start-up CPU: {cpu_first:.2f} s to first data, {cpu_warm - cpu_first:.2f} s in the "
          f"{args.warmup:g} s warm-up after it (not in the average below)")
    print(f"  CPU: {cpu_pct:.2f} % of one core          (target <= 2 %)")
    if ns0 is not None and ns1 is not None:
        ticks = (t1 - t0) / args.interval
        print(f"    per tick: {(ns1[0] - ns0[0]) / ticks / 1e6:.2f} ms CPU, main thread "
              f"{(ns1[1] - ns0[1]) / ticks / 1e6:.2f} ms (ns clock: /proc/PID/task/*/schedstat)")
    print(f"    user {(us1[0] - us0[0]) / (t1 - t0) * 100:.2f} %, "
          f"system {(us1[1] - us0[1]) / (t1 - t0) * 100:.2f} %")
    print(f"  context switches: {(sw1 - sw0) / (t1 - t0):.0f}/s (all threads)")
    print(f"  RSS: {rss:.1f} MB                      (target <= 100 MB)")
    if args.threads:
        el = t1 - t0
        print("  per thread (tid: CPU %, switches/s; the main thread's tid is the pid):")
        for tid, (c, sw) in sorted(th1.items()):
            c0, s0 = th0.get(tid, (0.0, 0))
            print(f"    {tid}{' (main)' if tid == tui.pid else ''}: {(c - c0) / el * 100:5.2f} %"
                  f"  {(sw - s0) / el:5.1f}/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
