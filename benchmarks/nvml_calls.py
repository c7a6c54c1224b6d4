"""What each NVML query that ``NvmlSampler`` makes costs on this machine's driver.

    python benchmarks/nvml_calls.py [--reps 200]

Needs a real NVIDIA driver. For GPU 0, prints per query the median and p95 wall time and the
median CPU time of the calling thread (microseconds), then one whole ``NvmlSampler.sample()``.
Tells which queries are worth sampling less often than every tick.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def measure(fn, reps: int) -> tuple[float, float, float, str]:
    """Median wall, p95 wall, median thread CPU (us), and an error name if the call failed."""
    wall, cpu = [], []
    for _ in range(reps):
        c0, w0 = time.thread_time(), time.perf_counter()
        try:
            fn()
        except Exception as exc:
            return float("nan"), float("nan"), float("nan"), type(exc).__name__
        wall.append((time.perf_counter() - w0) * 1e6)
        cpu.append((time.thread_time() - c0) * 1e6)
    wall.sort()
    return statistics.median(wall), wall[int(0.95 * (len(wall) - 1))], statistics.median(cpu), ""


def main() -> int:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    import pynvml as n

    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    print(f"driver {n.nvmlSystemGetDriverVersion()}, GPU 0: {n.nvmlDeviceGetName(h)}")
    sm, mem = n.NVML_CLOCK_SM, n.NVML_CLOCK_MEM
    queries = [
        ("GetUtilizationRates", lambda: n.nvmlDeviceGetUtilizationRates(h)),
        ("GetMemoryInfo (v2)", lambda: n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)),
        ("GetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h)),
        ("GetEnforcedPowerLimit", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h)),
        ("GetTotalEnergyConsumption", lambda: n.nvmlDeviceGetTotalEnergyConsumption(h)),
        ("GetTemperature", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
        ("GetTemperatureThreshold", lambda: n.nvmlDeviceGetTemperatureThreshold(
            h, n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
        ("GetFanSpeed", lambda: n.nvmlDeviceGetFanSpeed(h)),
        ("GetClockInfo SM", lambda: n.nvmlDeviceGetClockInfo(h, sm)),
        ("GetClockInfo MEM", lambda: n.nvmlDeviceGetClockInfo(h, mem)),
        ("GetCurrentClocksEventReasons",
         lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h)),
        ("GetPcieThroughput TX", lambda: n.nvmlDeviceGetPcieThroughput(
            h, n.NVML_PCIE_UTIL_TX_BYTES)),
        ("GetTotalEccErrors", lambda: n.nvmlDeviceGetTotalEccErrors(
            h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, n.NVML_VOLATILE_ECC)),
        ("GetMigMode", lambda: n.nvmlDeviceGetMigMode(h)),
        ("GetComputeRunningProcesses", lambda: n.nvmlDeviceGetComputeRunningProcesses(h)),
        ("GetGraphicsRunningProcesses", lambda: n.nvmlDeviceGetGraphicsRunningProcesses(h)),
    ]
    print(f"{'query':<30} {'wall med':>9} {'wall p95':>9} {'cpu med':>9}  (us, {args.reps} reps)")
    for label, fn in queries:
        reps = max(3, args.reps // 20) if "Pcie" in label else args.reps
        w, p, c, err = measure(fn, reps)
        print(f"{label:<30} {w:9.1f} {p:9.1f} {c:9.1f}  {err}")
    n.nvmlShutdown()

    from llmtop.gpu.nvml import NvmlSampler

    s = NvmlSampler()
    try:
        s.sample()
        w, p, c, err = measure(s.sample, max(10, args.reps // 4))
        print(f"{'NvmlSampler.sample() (whole)':<30} {w:9.1f} {p:9.1f} {c:9.1f}  {err}")
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
