"""Recording cost: MB per hour and CPU spent recording.

Monitors 4 demo targets (vllm, vllm, sglang, triton; their background traffic on) and
their simulated GPUs at a 1 s interval for --seconds, recording to a temporary file, and
prints the measured rate extrapolated to one hour (keyframes repeat every segment):

    .venv/bin/python benchmarks/record_size.py --seconds 120

Budget (issue 7): <= 5 MB/h for 4 vLLM-size targets + 2 GPUs at 1 s, <= 1 % of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from llmtop.config import Config
from llmtop.demo.launcher import start_demo
from llmtop.monitor import Monitor
from llmtop.record.live import RecordingMonitor
from llmtop.record.recorder import Recorder


class TimedRecorder(Recorder):
    """A Recorder that adds up the CPU time of its own calls."""

    cpu_s = 0.0
    raw_bytes = 0

    def scrape(self, raw):  # type: ignore[override]
        t = time.thread_time()
        super().scrape(raw)
        self.cpu_s += time.thread_time() - t
        self.raw_bytes += len(raw.body or "")

    def gpus(self, sample):  # type: ignore[override]
        t = time.thread_time()
        super().gpus(sample)
        self.cpu_s += time.thread_time() - t

    def tick(self, t_mono, t_wall):  # type: ignore[override]
        t = time.thread_time()
        super().tick(t_mono, t_wall)
        self.cpu_s += time.thread_time() - t


async def run(seconds: float, segment_s: float, flush_s: float | None) -> None:
    demo = start_demo(engines=["vllm", "vllm", "sglang", "triton"])
    try:
        config = demo.apply(Config())
        path = os.path.join(tempfile.mkdtemp(), "bench.llrec")
        kw = {"flush_s": flush_s} if flush_s else {}
        rec = TimedRecorder(path, config, segment_s=segment_s, **kw)
        mon = RecordingMonitor(Monitor.from_config(config, demo), rec)
        await mon.tick()
        rec.flush()
        key_bytes = os.path.getsize(path)  # noqa: ASYNC240 (one stat, between ticks)
        start = time.monotonic()
        ticks = 0
        while time.monotonic() - start < seconds:
            t0 = time.monotonic()
            await mon.tick()
            ticks += 1
            await asyncio.sleep(max(0.0, config.interval_s - (time.monotonic() - t0)))
        elapsed = time.monotonic() - start
        await mon.aclose()
        total = os.path.getsize(path)  # noqa: ASYNC240
        gpus = len(mon.store.snapshot(10.0).gpus)
    finally:
        demo.stop()
    delta_rate = (total - key_bytes) / elapsed
    per_hour = delta_rate * 3600 + key_bytes * 3600 / segment_s
    print(f"targets=4 gpus={gpus} interval=1s ticks={ticks} elapsed={elapsed:.0f}s")
    print(f"first keyframes: {key_bytes / 1e3:.1f} kB; then {delta_rate / 1e3:.2f} kB/s")
    print(f"raw scrape bodies: {rec.raw_bytes / elapsed * 3600 / 1e6:.0f} MB/h uncompressed")
    print(f"recording: {per_hour / 1e6:.2f} MB/h (keyframes every {segment_s:.0f}s included)")
    print(f"recorder CPU: {rec.cpu_s / elapsed * 100:.2f} % of one core")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--segment", type=float, default=300.0)
    p.add_argument("--flush", type=float, default=None,
                   help="frame interval (default: the recorder's)")
    a = p.parse_args()
    asyncio.run(run(a.seconds, a.segment, a.flush))


if __name__ == "__main__":
    main()
