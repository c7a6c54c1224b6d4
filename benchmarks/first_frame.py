"""Time to first data on screen: llmtop beside vllm-htop, on the same demo vLLM target.

    .venv/bin/python benchmarks/first_frame.py [--rounds 7] [--size 120x40]
                                               [--tree DIR] [--once-rounds 5]

Starts ``llmtop demo serve --engines vllm`` on 127.0.0.1, installs vllm-htop from PyPI into
its own venv (``~/.cache/llmtop/peers-venv``, reused), then, round after round (the order
rotated each round, so the machine's noise falls on every tool alike), starts each tool in a
detached tmux session of its own (a private tmux server, ``-L``) and polls its screen every
10 ms until data is on it:

- llmtop: the engine's row with its gauges (``:PORT ... RUN WAIT KV%``);
- vllm-htop: its TTFT row with a number;
- with ``--tree DIR`` also llmtop from another tree (``git archive REV | tar -x -C DIR``),
  as ``llmtop(base)``: before/after in the same run.

Then ``llmtop --once --window 1`` (and the ``--tree`` one) ``--once-rounds`` times each,
wall time from spawn to exit. Prints the median and every run of each tool, the
llmtop / vllm-htop ratio of the medians, and the load average before and after (the
machine is shared; only numbers of one run compare).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import PY, ROOT, start_demo

SOCKET = f"llmtop-first-{os.getpid()}"
PEERS_VENV = Path.home() / ".cache" / "llmtop" / "peers-venv"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=True, capture_output=True,
                          text=True).stdout


def install_vllm_htop(venv: Path) -> Path:
    exe = venv / "bin" / "vllm-htop"
    if not exe.exists():
        print(f"installing vllm-htop into {venv} ...", file=sys.stderr)
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                        "--disable-pip-version-check", "vllm-htop"], check=True)
    return exe


def first_data(name: str, cmd: list[str], marker: re.Pattern[str], size: tuple[str, str],
               env: dict[str, str], limit_s: float = 30.0) -> float:
    """Seconds from starting ``cmd`` in a fresh tmux session to ``marker`` on its screen."""
    line = "exec env " + " ".join(f"'{k}={v}'" for k, v in env.items()) + " " + \
        " ".join(f"'{c}'" for c in cmd)
    t0 = time.monotonic()
    tmux("new-session", "-d", "-s", name, "-x", size[0], "-y", size[1], "-c", str(ROOT), line)
    try:
        while time.monotonic() - t0 < limit_s:
            screen = tmux("capture-pane", "-p", "-t", name)
            if marker.search(screen):
                return time.monotonic() - t0
            time.sleep(0.01)
        raise SystemExit(f"{name}: no data on screen within {limit_s:g} s:\n{screen}")
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", name], capture_output=True)


def once_wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise SystemExit(f"{cmd}: exit {p.returncode}: {p.stderr[-500:]}")
    return time.monotonic() - t0


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def show(label: str, runs: list[float]) -> str:
    return (f"{label:<14} median {statistics.median(runs):5.2f} s   runs "
            + " ".join(f"{r:.2f}" for r in runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="TUI starts per tool (default 7)")
    ap.add_argument("--once-rounds", type=int, default=5,
                    help="llmtop --once runs per tree (default 5; 0: none)")
    ap.add_argument("--size", default="120x40", help="terminal size (default 120x40)")
    ap.add_argument("--tree", default=None, metavar="DIR",
                    help="also run llmtop from this tree (the 'before' of a change)")
    ap.add_argument("--peers-venv", default=str(PEERS_VENV), metavar="DIR",
                    help=f"venv holding (or to hold) vllm-htop (default {PEERS_VENV})")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (apt-get install tmux)")
    size = tuple(args.size.lower().split("x"))
    htop = install_vllm_htop(Path(args.peers_venv))
    tmp = Path(tempfile.mkdtemp(prefix="llmtop-first-"))
    load0 = loadavg()
    demo, info = start_demo(tmp)
    try:
        base = info["engines"][0]["base_url"]
        port = base.rsplit(":", 1)[1]
        common = {"TERM": "xterm-256color", "TEXTUAL_ANIMATIONS": "none"}
        row = re.compile(rf":{port}\s.*\s\d+\s+\d+\s+\d+%")
        llm = [PY, "-m", "llmtop", f"vllm@127.0.0.1:{port}", "--interval", "1",
               "--no-discover"]
        tools: dict[str, tuple[list[str], re.Pattern[str], dict[str, str]]] = {
            "llmtop": (llm, row, {**common, "PYTHONPATH": str(ROOT)}),
            "vllm-htop": ([str(htop), "--url", base, "--interval", "1"],
                          re.compile(r"TTFT\s+\(ms\)\s+[\d.]+"), common),
        }
        if args.tree:
            tree = str(Path(args.tree).resolve())
            tools["llmtop(base)"] = (llm, row, {**common, "PYTHONPATH": tree})
        times: dict[str, list[float]] = {n: [] for n in tools}
        names = list(tools)
        for i in range(args.rounds):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                cmd, marker, env = tools[n]
                times[n].append(first_data(n.replace("(", "-").replace(")", ""), cmd, marker,
                                           size, env))
        once: dict[str, list[float]] = {}
        once_cmd = [PY, "-m", "llmtop", "--once", "--window", "1", "--no-discover",
                    f"vllm@127.0.0.1:{port}"]
        trees = {"llmtop": str(ROOT)}
        if args.tree:
            trees["llmtop(base)"] = str(Path(args.tree).resolve())
        for _ in range(args.once_rounds):
            for n, t in trees.items():
                once.setdefault(n, []).append(once_wall(once_cmd, {"PYTHONPATH": t}))
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
        demo.terminate()
        try:
            demo.wait(10)
        except subprocess.TimeoutExpired:
            demo.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nOne demo vLLM target ({base}), terminal {args.size}, {args.rounds} interleaved "
          f"rounds; load average {load0} before, {loadavg()} after ({os.cpu_count()} CPUs).")
    print("\nfirst data on screen (spawn -> data drawn):")
    for n, runs in times.items():
        print("  " + show(n, runs))
    med = {n: statistics.median(r) for n, r in times.items()}
    print(f"  llmtop / vllm-htop: {med['llmtop'] / med['vllm-htop']:.2f}")
    if "llmtop(base)" in med:
        print(f"  llmtop / llmtop(base): {med['llmtop'] / med['llmtop(base)']:.2f}")
    if once:
        print("\nllmtop --once --window 1 (spawn -> exit):")
        for n, runs in once.items():
            print("  " + show(n, runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
