"""GPU peaks, the denominators of MBU and MFU: a table keyed by the NVML device name.

* ``PEAKS``: (name pattern, peak memory bandwidth in bytes/s, dense BF16 FLOP/s, source), the
  first matching pattern wins, so the specific names come before the general ones
* dense, never sparse: NVIDIA's headline tensor figures are "with sparsity", twice the dense
* ``peak_for(name)``: the table's ``GpuPeak`` for one device name, None for an unknown GPU
* ``parse_gpu_peak("3350,989")``: ``--gpu-peak GBPS,TFLOPS`` (GB = 1e9 bytes, TF = 1e12)
* ``engine_peak(target, gpus, override)``: the peak one engine divides by (the GPUs its
  processes sit on, ``GpuProcess.engine_target``), or why there is none
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from llmtop.config import GpuPeak
from llmtop.model import GpuRecord

__all__ = ["OVERRIDE_HINT", "PEAKS", "engine_peak", "parse_gpu_peak", "peak_for"]

OVERRIDE_HINT = "give --gpu-peak GBPS,TFLOPS"
"""How to give a peak the table does not have."""

_G, _T = 1e9, 1e12

PEAKS: tuple[tuple[str, float, float | None, str], ...] = (
    # H200 NVL: NVIDIA H200 datasheet, 4.8 TB/s, BF16 1,671 TF with sparsity (dense: half);
    # the figure was not found again by a search here
    (r"H200 NVL", 4800 * _G, 835.5 * _T, "NVIDIA H200 datasheet (H200 NVL)"),
    # H200 SXM 141GB: NVIDIA H200 datasheet, 4.8 TB/s, BF16 989 TF dense (1,979 sparse)
    (r"H200", 4800 * _G, 989 * _T, "NVIDIA H200 datasheet (H200 SXM)"),
    # H100 NVL 94GB: NVIDIA H100 datasheet, 3.9 TB/s (3.93 TB/s in the product brief);
    # BF16 1,671 TF with sparsity -> 835.5 dense (not found again by a search here)
    (r"H100 NVL", 3900 * _G, 835.5 * _T, "NVIDIA H100 datasheet (H100 NVL)"),
    # H100 PCIe 80GB: NVIDIA H100 datasheet as first published (reproduced by hpctech.co.jp):
    # 2,000 GB/s HBM2e, BF16 1,513 TF "shown with sparsity, 1/2 lower without"
    (r"H100.*PCIe", 2000 * _G, 756.5 * _T, "NVIDIA H100 datasheet (H100 PCIe)"),
    # H100 SXM 80GB (NVML: "NVIDIA H100 80GB HBM3"): NVIDIA H100 datasheet, 3,350 GB/s,
    # BF16 1,979 TF with sparsity -> 989 dense (glennklockwood.com: 989.4 matrix BF16)
    (r"H100", 3350 * _G, 989 * _T, "NVIDIA H100 datasheet (H100 SXM)"),
    # B200 (HGX, 1,000 W): NVIDIA's Blackwell figures as tabled by glennklockwood.com:
    # BF16 2,250 TF dense (4,500 sparse); 8 TB/s HBM3e (DGX B200 datasheet: 64 TB/s over 8)
    (r"B200", 8000 * _G, 2250 * _T, "NVIDIA DGX/HGX B200 datasheet (B200)"),
    # A100 80GB PCIe: NVIDIA A100 datasheet, 1,935 GB/s, BF16 312 TF dense (624 sparse)
    (r"A100.*(80GB.*PCIe|PCIE.*80GB)", 1935 * _G, 312 * _T,
     "NVIDIA A100 datasheet (A100 80GB PCIe)"),
    # A100 80GB SXM (NVML: "NVIDIA A100-SXM4-80GB"): NVIDIA A100 datasheet, 2,039 GB/s, 312 TF
    (r"A100.*80GB", 2039 * _G, 312 * _T, "NVIDIA A100 datasheet (A100 80GB SXM)"),
    # A100 40GB, SXM and PCIe: NVIDIA A100 datasheet, 1,555 GB/s, BF16 312 TF dense
    (r"A100", 1555 * _G, 312 * _T, "NVIDIA A100 datasheet (A100 40GB)"),
    # L40S 48GB: NVIDIA L40S datasheet (its table reproduced by resellers): 864 GB/s GDDR6,
    # BF16 362.05 TF dense, 733 with sparsity
    (r"L40S", 864 * _G, 362.05 * _T, "NVIDIA L40S datasheet"),
    # L4 24GB: NVIDIA L4 datasheet: 300 GB/s GDDR6, BF16 242 TF with sparsity -> 121 dense
    (r"\bL4\b", 300 * _G, 121 * _T, "NVIDIA L4 datasheet"),
    # A10G (AWS G5 only, no NVIDIA datasheet): 24 GB GDDR6 at 600 GB/s, as the A10 (Baseten,
    # "NVIDIA A10 vs A10G for ML model inference"); its tensor peak differs from the A10's
    # and no vendor figure was found: MFU needs --gpu-peak
    (r"A10G", 600 * _G, None, "AWS/Baseten A10G figures (bandwidth only)"),
)
"""(NVML name pattern, bytes/s, dense BF16 FLOP/s or None, source); first match wins."""

_COMPILED = tuple((re.compile(p, re.IGNORECASE), b, f, s) for p, b, f, s in PEAKS)


def peak_for(name: str | None) -> GpuPeak | None:
    """The table's peak for an NVML device name (``NVIDIA H100 80GB HBM3``); None when the
    name is missing or no row matches."""
    if not name:
        return None
    for rx, bw, fl, src in _COMPILED:
        if rx.search(name):
            return GpuPeak(bytes_per_s=bw, flops=fl, source=src, gpu=name)
    return None


def parse_gpu_peak(text: str, *, source: str = "--gpu-peak") -> GpuPeak:
    """``"GBPS,TFLOPS"`` (``3350,989``) -> a ``GpuPeak``; either may be empty (``3350,``:
    bandwidth only). Raises ``ValueError`` with a one-line reason on anything else."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 2:
        raise ValueError(f"{source} wants GBPS,TFLOPS (e.g. 3350,989), not {text!r}")
    vals: list[float | None] = []
    for p in parts:
        if not p:
            vals.append(None)
            continue
        try:
            v = float(p)
        except ValueError:
            raise ValueError(f"{source}: {p!r} is not a number (GBPS,TFLOPS)") from None
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"{source}: {p!r} must be a positive number (GBPS,TFLOPS)")
        vals.append(v)
    if vals[0] is None and vals[1] is None:
        raise ValueError(f"{source} wants GBPS,TFLOPS (e.g. 3350,989), not {text!r}")
    gbps, tflops = vals
    return GpuPeak(bytes_per_s=None if gbps is None else gbps * _G,
                   flops=None if tflops is None else tflops * _T, source=source)


def engine_peak(target: str, gpus: Iterable[GpuRecord], override: GpuPeak | None = None
                ) -> tuple[GpuPeak | None, str | None]:
    """The peak ``target``'s MBU/MFU divide by, and a line when there is none.

    The override wins. Else the GPUs whose processes are attributed to ``target``: one
    known model -> its row; an unknown model -> None and ``unknown GPU <name>: give
    --gpu-peak ...``; GPUs of different models -> None and a line saying so; no GPU seen
    for the engine (no GPU here, or not attributed) -> None, None."""
    if override is not None:
        return override, None
    names = sorted({g.name or "" for g in gpus
                    if any(p.engine_target == target for p in g.processes)})
    if not names:
        return None, None
    if len(names) > 1:
        return None, f"GPUs of different models ({', '.join(n or '?' for n in names)}): " \
                     f"{OVERRIDE_HINT}"
    peak = peak_for(names[0])
    if peak is None:
        return None, f"unknown GPU {names[0] or '(no name)'}: {OVERRIDE_HINT}"
    return peak, None
