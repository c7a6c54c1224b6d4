"""llmtop beside its peers: CPU and RSS of llmtop, vllm-htop and vllmstat watching the same
demo vLLM target, at a 1 s refresh, each in its own 120x40 terminal (tmux), in one run.

    .venv/bin/python benchmarks/peers.py [--seconds 60] [--warmup 10] [--size 120x40]
                                         [--interval 1] [--peers-venv DIR]

Installs the peers from PyPI (``pip install vllm-htop vllmstat``) into a temporary venv (or
reuses ``--peers-venv``), starts ``llmtop demo serve --engines vllm`` on 127.0.0.1, then runs
the three tools at the same time (so they share the machine's noise), each in a detached
tmux session of its own (a private tmux server, ``-L``), waits ``--warmup`` seconds and
measures the CPU time of each tool's process tree over ``--seconds`` (``/proc``) and its RSS
at the end. Prints CPU % of one core and RSS per tool, and llmtop / peer as ratios (below 1:
llmtop is cheaper), plus the first lines of each screen, to show every tool drew data.
No GPU flags: each tool reads GPUs its default way (none here without NVML).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
PEERS = ("vllm-htop", "vllmstat")
SOCKET = f"llmtop-peers-{os.getpid()}"


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (the ones still alive)."""
    total = 0
    for p in pids:
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
    return total / CLK


def rss_mb(pids: list[int]) -> float:
    total = 0
    for p in pids:
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
        except OSError:
            continue
    return total / 1e6


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], check=True, capture_output=True,
                          text=True).stdout


def install_peers(venv: Path) -> None:
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                    *PEERS], check=True)


def versions(venv: Path) -> dict[str, str]:
    out = subprocess.run([str(venv / "bin" / "pip"), "list", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    have = {p["name"].lower(): p["version"] for p in json.loads(out)}
    return {name: have.get(name, "?") for name in PEERS}


def start_demo(tmp: Path) -> tuple[subprocess.Popen[bytes], dict]:
    ready = tmp / "ready.json"
    proc = subprocess.Popen([PY, "-m", "llmtop", "demo", "serve", "--engines", "vllm",
                             "--quiet", "--ready-file", str(ready)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the demo did not start")
        time.sleep(0.2)
    return proc, json.loads(ready.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measured window (default 60)")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds before it (default 10)")
    ap.add_argument("--size", default="120x40", help="terminal size (default 120x40)")
    ap.add_argument("--interval", type=float, default=1.0, help="refresh interval (default 1)")
    ap.add_argument("--peers-venv", default=None, metavar="DIR",
                    help="venv holding (or to hold) the peers; default: a temporary one")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (apt-get install tmux)")
    cols, rows = args.size.lower().split("x")
    tmp = Path(tempfile.mkdtemp(prefix="llmtop-peers-"))
    venv = Path(args.peers_venv) if args.peers_venv else tmp / "venv"
    print(f"installing {', '.join(PEERS)} into {venv} ...", file=sys.stderr)
    install_peers(venv)
    v = versions(venv)
    demo, info = start_demo(tmp)
    base = info["engines"][0]["base_url"]
    port = base.rsplit(":", 1)[1]
    iv = f"{args.interval:g}"
    tools = {
        "llmtop": [PY, "-m", "llmtop", f"vllm@127.0.0.1:{port}", "--interval", iv,
                   "--no-discover"],
        "vllm-htop": [str(venv / "bin" / "vllm-htop"), "--url", base, "--interval", iv],
        "vllmstat": [str(venv / "bin" / "vllmstat"), "-u", base, "-i", iv],
    }
    pids: dict[str, int] = {}
    try:
        for name, cmd in tools.items():
            line = "exec " + " ".join(f"'{c}'" for c in cmd)
            tmux("new-session", "-d", "-s", name, "-x", cols, "-y", rows, "-c", str(ROOT), line)
            pids[name] = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}").split()[0])
        time.sleep(args.warmup)
        start = {n: (cpu_s(tree(p)), time.monotonic()) for n, p in pids.items()}
        time.sleep(args.seconds)
        res: dict[str, tuple[float, float]] = {}
        for n, p in pids.items():
            procs = tree(p)
            c0, t0 = start[n]
            res[n] = (100 * (cpu_s(procs) - c0) / (time.monotonic() - t0), rss_mb(procs))
        screens = {n: tmux("capture-pane", "-p", "-t", n) for n in pids}
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
        demo.terminate()
        try:
            demo.wait(10)
        except subprocess.TimeoutExpired:
            demo.kill()
        if not args.peers_venv:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nOne demo vLLM target ({base}), refresh {iv} s, terminal {cols}x{rows}, "
          f"{args.seconds:g} s measured after {args.warmup:g} s, all three at once.")
    print("peers: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    cpu0, rss0 = res["llmtop"]
    print(f"\n{'tool':<10} {'CPU % of one core':>18} {'RSS MB':>8} {'llmtop/tool CPU':>16} "
          f"{'llmtop/tool RSS':>16}")
    for n, (cpu, rss) in res.items():
        rc = f"{cpu0 / cpu:.2f}" if cpu > 0 else "–"
        rr = f"{rss0 / rss:.2f}" if rss > 0 else "–"
        print(f"{n:<10} {cpu:>18.2f} {rss:>8.1f} {rc:>16} {rr:>16}")
    for n, text in screens.items():
        lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
        print(f"\n--- {n} screen (first 4 of {len(lines)} non-empty lines)")
        for ln in lines[:4]:
            print("  " + ln[:116])
    return 0


if __name__ == "__main__":
    sys.exit(main())
