"""A flood of log lines into a followed file: the follower's CPU and the process's peak RSS.

A separate process appends vLLM-shaped lines (the real vLLM 0.32's line shape, as quoted in
the project's log notes: ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:N] message``, one
traceback of 8 lines every 1,000 lines) at ``--rate`` lines/s (10,000) for ``--seconds``
(30) to a file, in batches every 10 ms on an absolute schedule.

- Default: the follower in this process (``sources.logs.Follower`` with the real
  ``parse.logs.assembler``, ``--lines`` 2000 per drain) drained once a second as the
  monitor's tick does. Prints the reader thread's CPU and the whole process's (% of one
  core, over the flood), the peak RSS, lines written, events drained and dropped.
- ``--record`` / ``--tui``: ``llmtop record`` (headless) or the TUI (80x24 pty) watching a
  target on a closed loopback port with ``--log TARGET=FILE``; prints that process's CPU
  and peak RSS over the flood (the whole monitor: follower, tick, store, UI).

    .venv/bin/python benchmarks/log_flood.py [--rate 10000] [--seconds 30] [--record|--tui]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK = os.sysconf("SC_CLK_TCK")

WRITER = r"""
import sys, time
path, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
P = "(APIServer pid=20852) "
info = (P + "INFO 12-07 04:47:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
        "0.0 tokens/s, Avg generation throughput: {n} tokens/s, Running: 3 reqs")
E = P + "ERROR 12-07 04:47:{s:02d} [async_llm.py:906] "
tb = [E + "AsyncLLM output_handler failed.", E + "Traceback (most recent call last):",
      E + '  File "vllm/v1/engine/async_llm.py", line 849, in output_handler'] + [
      E + "    outputs = await engine_core.get_output_async()"] * 4 + [
      E + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
      "See stack trace (above) for the root cause."]
n, t0 = 0, time.monotonic()
step = 0.01 if rate >= 100 else 1.0 / rate  # batches every 10 ms; a slow rate line by line
per = max(1, int(rate * step))
with open(path, "a", buffering=1 << 20) as f:
    k = 0
    while time.monotonic() - t0 < seconds:
        k += 1
        s = int(time.time()) % 60
        out = []
        for _ in range(per):
            n += 1
            if n % 1000 == 0:
                out += [x.format(s=s) for x in tb]
                n += len(tb) - 1
            else:
                out.append(info.format(s=s, n=n))
        f.write("\n".join(out) + "\n")
        f.flush()
        delay = t0 + k * step - time.monotonic()
        if delay > 0:
            time.sleep(delay)
print(n)
"""


def cpu_s(pid: int, tid: int | None = None) -> float:
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _writer(log: Path, a: argparse.Namespace) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(a.rate),
                             str(a.seconds)], stdout=subprocess.PIPE, text=True)


def in_process(log: Path, a: argparse.Namespace) -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    from llmtop.model import LogLocation
    from llmtop.parse.logs import assembler
    from llmtop.sources.logs import Follower

    f = Follower(assembler, lines=a.lines)
    f.follow("vllm@127.0.0.1:1", LogLocation("file", str(log), path=str(log), fmt="vllm"))
    time.sleep(1.0)
    reader = next(t for t in threading.enumerate() if t.name == "llmtop-logs")
    tid = reader.native_id
    me = os.getpid()
    c0, r0, t0 = cpu_s(me), cpu_s(me, tid), time.monotonic()
    w = _writer(log, a)
    events = dropped = 0
    while w.poll() is None:
        time.sleep(1.0)  # a tick
        for raw in f.drain():
            events += len(raw.events)
            dropped += raw.dropped
    time.sleep(1.0)
    for raw in f.drain():
        events += len(raw.events)
        dropped += raw.dropped
    c1, r1, t1 = cpu_s(me), cpu_s(me, tid), time.monotonic()
    written = int((w.stdout.read() if w.stdout else "0").strip() or 0)
    f.close()
    return {"what": "follower", "rate_asked": a.rate, "lines_written": written,
            "events_drained": events, "dropped": dropped,
            "reader_cpu_pct_of_one_core": round(100 * (r1 - r0) / (t1 - t0), 1),
            "process_cpu_pct_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "seconds": round(t1 - t0, 1)}


def whole(log: Path, a: argparse.Namespace, tmp: Path) -> dict[str, object]:
    with socket.socket() as s:  # a closed loopback port: the target is DOWN, its log is not
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = f"vllm@127.0.0.1:{port}"
    flags = [target, "--no-discover", "--log", f"{target}={log}"]
    cmd = [sys.executable, "-m", "llmtop", *flags] if a.tui else [
        sys.executable, "-m", "llmtop", "record", str(tmp / "flood.llmtop"), *flags]
    env = {**os.environ, "TEXTUAL_ANIMATIONS": "none", "COLUMNS": "80", "LINES": "24"}
    master = None
    if a.tui:
        master, slave = pty.openpty()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
                                env=env, start_new_session=True)
    else:
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL, env=env)
    try:
        end = time.monotonic() + 8  # started and settled
        while time.monotonic() < end:
            if master is not None:
                try:
                    os.read(master, 65536)
                except OSError:
                    pass
            time.sleep(0.1)
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        w = _writer(log, a)
        while w.poll() is None:
            if master is not None:
                try:
                    os.read(master, 65536)
                except OSError:
                    pass
            time.sleep(0.2)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        peak = peak_rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {"what": "tui" if a.tui else "record", "rate_asked": a.rate,
            "cpu_pct_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 1),
            "peak_rss_mb": round(peak, 1), "seconds": round(t1 - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rate", type=float, default=10_000, help="lines per second")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--lines", type=int, default=2000, help="events kept per drain")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--record", action="store_true", help="llmtop record, headless")
    mode.add_argument("--tui", action="store_true", help="the TUI in an 80x24 pty")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="llmtop-flood-"))
    log = tmp / "vllm.log"
    log.write_text("")
    try:
        out = whole(log, a, tmp) if (a.record or a.tui) else in_process(log, a)
        out["log_mb"] = round(log.stat().st_size / 1e6, 1)
        print(json.dumps(out))
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
