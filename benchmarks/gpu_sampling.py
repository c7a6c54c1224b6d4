"""The GPU sampler's CPU time per sample with and without GPM (and the other activity calls).

    python benchmarks/gpu_sampling.py [--samples 300] [--gpus 8]

Over the C stand-in for libnvidia-ml (``tests/gpu/nvml_standin.c``, built with ``cc`` into a
temp dir and loaded by the real ``pynvml``), ``--gpus`` GPUs, three ways:

- ``before``: the sampler without its activity step (what it read before GPM);
- ``no GPM``: an A100-like GPU: per-process SM time, NVLink field values, violation times;
- ``GPM``: an H100-like GPU: one GPM window per GPU each sample, plus the calls above.

The sampler's clock advances 1 s per sample, so every sample closes a GPM window. Then, when
a real NVIDIA driver loads, the same over the real GPUs (``before`` and as the driver
answers). Prints CPU time of the sampling thread per sample (median, p95) in microseconds;
the stand-in's numbers are pynvml/ctypes and llmtop's own work, not the driver's.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SOURCE = ROOT / "tests" / "gpu" / "nvml_standin.c"


def _script(gpus: int, gpm: bool) -> str:
    lines = []
    for i in range(gpus):
        name = "NVIDIA H100 80GB HBM3" if gpm else "NVIDIA A100-SXM4-80GB"
        lines += [f"device {i} name {name}", f"device {i} uuid GPU-{i:04d}",
                  f"device {i} util 90 40", f"device {i} memory 85899345920 1 2",
                  f"device {i} power 300000", f"device {i} gpm {int(gpm)}",
                  f"device {i} proc {1000 + i} 1073741824",
                  f"device {i} procutil {1000 + i} 40 {2**62}",
                  f"device {i} nvlinks 18", f"device {i} violation 0 1000",
                  f"device {i} violation 1 0"]
        lines += [f"device {i} nvlink {k} {k * 1000} {k * 900}" for k in range(18)]
        lines += [f"device {i} metric {m} 42" for m in (2, 3, 5, 10, 13, 20, 21, 60, 61)]
    return "\n".join(lines) + "\n"


def _run(make: Callable[[Callable[[], float]], Any], n: int, activity: bool) -> tuple[float, float]:
    """Median and p95 thread CPU (us) of ``sample()``, after 3 warm-up samples."""
    from llmtop.gpu.nvml import NvmlSampler

    t = [0.0]
    s = make(lambda: t[0])
    if not activity:
        s._activity = lambda *a, **k: None  # the sampler as it was before its activity step
    cpu = []
    try:
        for i in range(n + 3):
            t[0] += 1.0
            c0 = time.thread_time()
            got = s.sample()
            if i >= 3:
                cpu.append((time.thread_time() - c0) * 1e6)
            if got.error:
                raise RuntimeError(got.error)
    finally:
        s.close()
    assert isinstance(s, NvmlSampler)
    cpu.sort()
    return statistics.median(cpu), cpu[int(0.95 * (len(cpu) - 1))]


def _line(label: str, got: tuple[float, float], gpus: int) -> None:
    med, p95 = got
    print(f"  {label:<22} {med:8.0f} us median  {p95:8.0f} us p95  "
          f"({med / gpus:6.0f} us per GPU)")


def _real(n: int) -> None:
    import pynvml

    from llmtop.gpu.nvml import NvmlSampler

    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        pynvml.nvmlShutdown()
    except Exception as e:
        print(f"real NVML: not here ({type(e).__name__}: {e})")
        return
    print(f"real NVML: {count} GPU(s), GPU 0 {name!r}")

    def make(clock: Callable[[], float]) -> NvmlSampler:
        return NvmlSampler(nvml=pynvml, clock=clock, hostname="bench")

    _line("before (no activity)", _run(make, n, activity=False), count)
    _line("as the driver answers", _run(make, n, activity=True), count)
    s = make(time.monotonic)
    s.sample()
    time.sleep(0.2)
    g = s.sample().gpus[0]
    s.close()
    print(f"  GPU 0: activity_source={g.activity_source} note={g.activity_note!r} "
          f"sm_active={g.sm_active} dram_active={g.dram_active}")


def main() -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    import pynvml

    from llmtop.gpu.nvml import NvmlSampler

    _real(args.samples)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        print("no C compiler: the stand-in runs are skipped")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        lib_path = Path(tmp) / "libnvidia-ml.so.1"
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib_path), str(SOURCE)],
                       check=True)
        pynvml.nvmlLib = ctypes.CDLL(str(lib_path))
        pynvml._nvmlGetFunctionPointer_cache = {}
        script = Path(tmp) / "script.txt"
        import os

        os.environ["NVML_STANDIN_SCRIPT"] = str(script)

        def make(clock: Callable[[], float]) -> NvmlSampler:
            return NvmlSampler(nvml=pynvml, clock=clock, wall=lambda: 1000.0,
                               hostname="bench", host_pid_namespace=False)

        print(f"C stand-in, {args.gpus} GPUs, {args.samples} samples each "
              "(thread CPU time of one sample() of all GPUs):")
        script.write_text(_script(args.gpus, gpm=False))
        _line("before (no activity)", _run(make, args.samples, activity=False), args.gpus)
        _line("no GPM (A100-like)", _run(make, args.samples, activity=True), args.gpus)
        script.write_text(_script(args.gpus, gpm=True))
        _line("GPM (H100-like)", _run(make, args.samples, activity=True), args.gpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
