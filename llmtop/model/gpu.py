"""GPU records: one GPU as read (NVML, DCGM, Triton), the processes on it, one sampling tick.

- ``GpuRecord``: one GPU; ``None`` = not reported.
- ``GpuProcess``: a process holding memory on a GPU, attributed to an engine when known.
- ``GpuSample``: the GPUs of one tick, or why none could be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["GpuProcess", "GpuRecord", "GpuSample"]


@dataclass(slots=True)
class GpuProcess:
    """A process holding memory on a GPU."""

    pid: int | None
    name: str | None = None
    used_bytes: int | None = None
    engine_target: str | None = None
    """Name of the monitored target this process belongs to, when attributed."""
    cmdline: str | None = None
    visible: bool = True
    """False when the pid is not visible from this PID namespace (containers)."""
    user: str | None = None
    """The process owner's user name (from /proc, on the sampling machine), when known."""
    sm_util: float | None = None
    """Share of the last interval the process had a kernel on the SMs, 0..1
    (``nvmlDeviceGetProcessUtilization``); busy time, like ``GpuRecord.util``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "name": self.name,
            "used_bytes": self.used_bytes,
            "engine_target": self.engine_target,
            "user": self.user,
            "sm_util": self.sm_util,
        }


@dataclass(slots=True)
class GpuRecord:
    """One GPU, from NVML, DCGM exporter, Triton's ``nv_gpu_*`` or the demo. Fractions are 0..1."""

    host: str
    index: int
    source: str
    """``nvml`` | ``dcgm`` | ``triton`` | ``demo``."""
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    util: float | None = None
    mem_util: float | None = None
    mem_used_bytes: int | None = None
    mem_free_bytes: int | None = None
    mem_reserved_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    temp_c: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    mem_temp_c: float | None = None
    fan_pct: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_clock_max_mhz: float | None = None
    throttle: list[str] | None = None
    """Clock-event reasons in words (``power cap``, ``thermal slowdown``...); [] = none active."""
    pcie_tx_bytes_s: float | None = None
    pcie_rx_bytes_s: float | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    xid: int | None = None
    mig_mode: bool | None = None
    mig_instances: list[str] = field(default_factory=list)
    sm_active: float | None = None
    """Real GPU activity, 0..1 whatever the source (GPM 0-100 and DCGM 0-1 both land here):
    SMs with at least one warp resident, averaged over SMs and time."""
    sm_occupancy: float | None = None
    """Resident warps / the SMs' maximum, averaged."""
    tensor_active: float | None = None
    """Any tensor pipe active (FP8 GEMMs show only here)."""
    dram_active: float | None = None
    """DRAM interface busy, as a share of its peak bandwidth."""
    fp16_active: float | None = None
    """FP16/BF16 (non-tensor) pipe active."""
    nvlink_tx_bytes_s: float | None = None
    nvlink_rx_bytes_s: float | None = None
    activity_source: str | None = None
    """Where the activity fields came from: ``gpm`` | ``dcgm`` | ``demo``; None: none."""
    activity_note: str | None = None
    """Why there are no activity fields, one line (``GPM: not supported on NVIDIA A100``)."""
    mig_activity: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """Per MIG GPU instance (key: the instance id as text), the activity fields GPM measured
    for it (``sm_active``, ``dram_active``... as above); empty outside MIG or without GPM."""
    throttle_time: dict[str, float] | None = None
    """Share of the last interval each clock limit held the clocks down (violation status:
    ``power``, ``thermal``, ...), 0..1."""
    extra: dict[str, float] = field(default_factory=dict)
    """Source-specific extras (e.g. DCGM ``tensor_active``), shown in GPU detail."""
    processes: list[GpuProcess] = field(default_factory=list)
    error: str | None = None
    """Set when this GPU could not be read (e.g. "GPU is lost")."""

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "util": self.util,
            "mem_util": self.mem_util,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "temp_c": self.temp_c,
            "sm_clock_mhz": self.sm_clock_mhz,
            "sm_clock_max_mhz": self.sm_clock_max_mhz,
            "throttle": self.throttle,
            "sm_active": self.sm_active,
            "sm_occupancy": self.sm_occupancy,
            "tensor_active": self.tensor_active,
            "dram_active": self.dram_active,
            "fp16_active": self.fp16_active,
            "nvlink_tx_bytes_s": self.nvlink_tx_bytes_s,
            "nvlink_rx_bytes_s": self.nvlink_rx_bytes_s,
            "activity_source": self.activity_source,
            "activity_note": self.activity_note,
            "throttle_time": self.throttle_time,
            "mig_activity": self.mig_activity,
            "processes": [p.to_json() for p in self.processes],
            "source": self.source,
            "error": self.error,
        }


@dataclass(slots=True)
class GpuSample:
    """One GPU sampling tick: the GPUs read, or why none could be read."""

    t_wall: float
    t_mono: float
    gpus: list[GpuRecord] = field(default_factory=list)
    error: str | None = None
    """One line: reason plus hint, e.g. ``gpu.reasons.LIBRARY_NOT_FOUND``."""
    cost_s: float | None = None
