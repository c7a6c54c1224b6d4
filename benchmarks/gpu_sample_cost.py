"""Time per ``sample()``: NvmlSampler over the fake pynvml (8 GPUs, processes, attribution
against a real local listener) and, when NVML initializes here, over the real driver.

    .venv/bin/python benchmarks/gpu_sample_cost.py [--ticks 200] [--gpus 8]

Prints numbers only; the fake measures llmtop's own overhead (the real driver adds the time
NVML itself spends, e.g. ~20 ms per PCIe throughput read, which llmtop does every 5 s).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmtop.config import Target
from llmtop.gpu.nvml import NvmlSampler
from tests.gpu.fake_pynvml import FakeDevice, FakeNvml, FakeProc


def _report(label: str, costs: list[float]) -> None:
    ms = sorted(c * 1e3 for c in costs)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(
        f"{label:<48} n={len(ms):<4} median={statistics.median(ms):7.3f} ms"
        f"  p95={p95:7.3f} ms  max={ms[-1]:7.3f} ms"
    )


def _run(sampler: NvmlSampler, ticks: int) -> list[float]:
    first = sampler.sample()
    if first.error:
        print(f"  (error: {first.error})")
    costs = []
    for _ in range(ticks):
        s = sampler.sample()
        costs.append(s.cost_s or 0.0)
    return costs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args(argv)

    me = os.getpid()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    targets = [
        Target(name="self", base_url=f"http://127.0.0.1:{port}", host="127.0.0.1", port=port),
        Target(name="down", base_url="http://127.0.0.1:1", host="127.0.0.1", port=1),
    ]

    def devices(with_procs: bool) -> list[FakeDevice]:
        out = []
        for i in range(args.gpus):
            procs = [FakeProc(me, 10 * 1024**3), FakeProc(2**30 + i, 1024**3)] if with_procs else []
            out.append(FakeDevice(uuid=f"GPU-{i:08d}", clock_events=0x4, compute=procs))
        return out

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, {args.gpus} fake GPUs")
    s = NvmlSampler(nvml=FakeNvml(devices(False)), hostname="bench")
    _report("fake, no processes", _run(s, args.ticks))
    s.close()

    s = NvmlSampler(nvml=FakeNvml(devices(True)), hostname="bench")
    _report("fake, 2 processes/GPU, no targets", _run(s, args.ticks))
    s.close()

    s = NvmlSampler(targets, nvml=FakeNvml(devices(True)), hostname="bench")
    _report("fake, 2 processes/GPU, attribution (2 targets)", _run(s, args.ticks))
    s.close()

    s = NvmlSampler(nvml=FakeNvml(init_error=FakeNvml.NVMLError_DriverNotLoaded))
    _report("fake, driver not loaded (between retries)", _run(s, args.ticks))
    s.close()

    real = NvmlSampler(targets)
    t0 = time.perf_counter()
    first = real.sample()
    print(f"real NVML first sample (init): {(time.perf_counter() - t0) * 1e3:.2f} ms")
    if first.error:
        print(f"real NVML: {first.error}")
    else:
        print(
            f"real NVML: {len(first.gpus)} GPU(s): {', '.join(g.name or '?' for g in first.gpus)}"
        )
        _report("real NVML", _run(real, min(args.ticks, 50)))
    real.close()
    listener.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
