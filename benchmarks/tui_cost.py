"""What the TUI costs on the box it watches: CPU % of one core, RSS, time to first data.

Starts ``llmtop demo serve`` (4 engines, their demo GPUs) as a separate process, then runs
the llmtop TUI in a pseudo-terminal (80x24 by default) monitoring those targets and the demo
GPU endpoint at a 1 s interval, draining the terminal output like a real terminal would.

    .venv/bin/python benchmarks/tui_cost.py [--seconds 60] [--size 80x24] [--interval 1]

Prints: time to first data on screen (spawn -> first engine row drawn), CPU % of one core
averaged over the measured window (after first data), and RSS at the end. Targets (issue 5):
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
targets = tuple(Target(name=e["target"], base_url=e["base_url"], engine=e["engine"],
                       port=e["port"]) for e in info["engines"])
config = Config(targets=targets, interval_s=float(sys.argv[2]), discover=False)
sys.exit(run_tui(config, demo=SimpleNamespace(gpu_url=info["gpu_url"])))
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_demo(engines: str) -> tuple[subprocess.Popen, dict]:
    ready = Path(tempfile.mkdtemp()) / "ready.json"
    proc = subprocess.Popen(
        [PY, "-m", "llmtop", "demo", "serve", "--engines", engines, "--quiet",
         "--ready-file", str(ready)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("demo serve did not start")
        time.sleep(0.05)
    return proc, json.loads(ready.read_text())


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
    args = ap.parse_args()
    cols, rows = (int(x) for x in args.size.split("x"))

    demo, info = start_demo(args.engines)
    marker = info["engines"][0]["target"].replace("127.0.0.1", "").encode()
    env = dict(os.environ, TERM="xterm-256color", TEXTUAL_ANIMATIONS="none", COLUMNS=str(cols),
               LINES=str(rows))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    t_spawn = time.monotonic()
    tui = subprocess.Popen([PY, "-c", DRIVER, json.dumps(info), str(args.interval)],
                           stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env,
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
        cpu0, t0 = cpu_seconds(tui.pid), time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            drain(master, 0.2)
            if tui.poll() is not None:
                raise SystemExit(f"llmtop exited early: {tui.returncode}")
        cpu1, t1 = cpu_seconds(tui.pid), time.monotonic()
        rss = rss_mb(tui.pid)
        try:
            with urllib.request.urlopen(info["gpu_url"], timeout=2) as resp:
                n_gpus = f"{len(json.load(resp)['gpus'])} demo GPUs"
        except Exception:
            n_gpus = "demo GPUs"
    finally:
        if tui.poll() is None:
            os.killpg(tui.pid, signal.SIGTERM)
            try:
                tui.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(tui.pid, signal.SIGKILL)
        demo.terminate()
        demo.wait(10)
        os.close(master)
    cpu_pct = (cpu1 - cpu0) / (t1 - t0) * 100
    print(f"llmtop TUI cost: {len(info['engines'])} targets ({args.engines}), {n_gpus}, "
          f"interval {args.interval:g}s, {cols}x{rows}, measured {t1 - t0:.0f}s")
    print(f"  time to first data on screen: {first_data:.2f} s   (target <= 1.0 s)")
    print(f"  CPU: {cpu_pct:.2f} % of one core          (target <= 2 %)")
    print(f"  RSS: {rss:.1f} MB                      (target <= 100 MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
