"""A simulated GPU per demo engine, driven by that engine's batch.

Memory = weights + the engine's reserved KV pool + activations (reserved at start, as vLLM's
``gpu_memory_utilization`` does); SM utilization = share of wall time the engine spent in
steps; power follows utilization and batch size; temperature follows power with a ~20 s lag;
under sustained power near the limit the SM clock drops and ``power cap`` is reported.

``overheat()`` (the ``gpu-throttle`` scenario) makes the GPU protect itself: the temperature
climbs past the slowdown threshold, NVML's ``hw slowdown`` and ``hw thermal slowdown``
reasons are set, the SM clock falls to 45 % of its maximum, and the engine's steps slow down
by the same ratio (``Engine.clock_factor``).

GPU activity, GPM-shaped (``activity_source`` ``demo``, fractions 0..1), follows the engine's
own count of its work (the ``est_*`` counters ``sim.Engine`` keeps, as vLLM's
``--enable-mfu-metrics``), smoothed like ``util``:

- ``dram_active``: bytes moved / (interval x peak bandwidth), x 1.08 for the traffic the
  estimate leaves out (activations, sampling);
- ``tensor_active``: FLOPs / (interval x dense peak), x 1.25 (a tensor pipe is busy more
  cycles than its peak rate would need);
- ``sm_active``: SMs with warps resident: the busy time x how much of the GPU a step's
  kernels fill (0.55 at a batch of 1 to 0.9 from 32 rows), at least 0.9 x the busier of the
  two above; ``sm_occupancy`` grows with the batch;
  ``fp16_active``: the non-tensor half-precision work, a seventh of the tensor pipe's.

Between steps (the host's share of time) every one of them is 0: an engine that leaves the
GPU idle shows low activity however busy NVML's ``util`` reads. A step stretched by
``Engine.decode_factor`` (``decode-slowdown``'s noisy neighbour, ``spec-decode-drop``'s
uncounted draft verification) stays as busy as an unstretched one: the neighbour's work is the
GPU's too, so only the engine's own count (MBU) falls.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from llmtop import clock
from llmtop.demo.sim import Engine

__all__ = ["SimGpu"]

_SLOWDOWN_C = 87.0
_HOT_CLOCK = 0.45
"""SM clock under a HW (thermal) slowdown, as a share of the maximum."""
_DRAM_EXTRA = 1.08
_TENSOR_EXTRA = 1.25


def _work(engine: Engine) -> tuple[float, float]:
    """(bytes moved, FLOPs) the engine counted since its (re)start."""
    c = engine.stats.c
    return c["est_read_bytes"] + c["est_write_bytes"], c["est_flops"]


class SimGpu:
    """One simulated GPU attached to one engine."""

    def __init__(self, index: int, engine: Engine, target_name: str):
        self.index = index
        self.engine = engine
        self.target_name = target_name
        p = engine.profile
        digest = hashlib.sha1(f"llmtop-demo-{index}".encode()).hexdigest()
        self.uuid = (f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-"
                     f"{digest[20:32]}")
        self.name = p.gpu_name
        self.mem_total_bytes = p.mem_total_bytes
        self.power_limit_w = p.power_limit_w
        self.util = 0.0
        self.power_w = p.power_idle_w
        self.temp_c = p.temp_ambient_c + 3.0
        self.energy_j = 0.0
        self.sm_clock_mhz = p.sm_clock_max_mhz
        self.throttle: list[str] = []
        self._hot_s = 0.0
        self.overheated = False
        self._last = (clock.monotonic(), engine.busy_s)
        self._last_work = _work(engine)
        self.dram_active = 0.0
        self.tensor_active = 0.0

    @property
    def mem_used_bytes(self) -> int:
        e = self.engine
        p = e.profile
        kv = e.pool.total * e.settings.block_size * p.kv_bytes_per_token
        return int(p.weights_bytes + p.activation_bytes + kv + 512 * 1024 * 1024)

    def overheat(self, on: bool = True) -> None:
        """Start (or stop) a thermal slowdown of this GPU."""
        self.overheated = on

    def update(self) -> None:
        """Advance the GPU state to now (call every ~0.5 s)."""
        now = clock.monotonic()
        t0, busy0 = self._last
        dt = now - t0
        if dt <= 0:
            return
        e = self.engine
        busy = e.busy_s
        if busy < busy0:  # engine restarted
            busy0 = busy
        self._last = (now, busy)
        p = e.profile
        inst = min(1.0, max(0.0, (busy - busy0) / dt))
        a = min(1.0, dt / 1.0)
        self.util += (inst - self.util) * a
        moved, flops = _work(e)
        moved0, flops0 = self._last_work
        if moved < moved0 or flops < flops0:  # the engine restarted: its counters too
            moved0 = flops0 = 0.0
        self._last_work = (moved, flops)
        # a step stretched by decode_factor (a noisy neighbour's kernels, or the draft
        # verification the spec-decode scenario leaves uncounted) keeps the GPU as busy
        other = max(1.0, e.decode_factor)
        dram = min(1.0, (moved - moved0) / dt / p.peak_bytes_s * _DRAM_EXTRA * other)
        tensor = min(1.0, (flops - flops0) / dt / p.peak_flops * _TENSOR_EXTRA * other)
        self.dram_active += (dram - self.dram_active) * a
        self.tensor_active += (tensor - self.tensor_active) * a
        batch_frac = min(1.0, e.last_batch / max(1, e.settings.max_num_seqs))
        load = self.util * (0.55 + 0.45 * batch_frac)
        target_w = p.power_idle_w + (p.power_limit_w * 1.02 - p.power_idle_w) * load
        self.power_w += (target_w - self.power_w) * min(1.0, dt / 2.0)
        if self.power_w >= p.power_limit_w * 0.97:
            self._hot_s += dt
        else:
            self._hot_s = max(0.0, self._hot_s - 2 * dt)
        capped = self._hot_s > 5.0
        self.power_w = min(self.power_w, p.power_limit_w)
        self.throttle = ["power cap"] if capped else []
        want_clock = p.sm_clock_max_mhz * (0.88 if capped else 1.0)
        target_t = p.temp_ambient_c + 3.0 + 45.0 * (self.power_w - p.power_idle_w) / (
            p.power_limit_w - p.power_idle_w)
        if self.overheated:  # failing cooling: past the slowdown threshold, clocks cut
            target_t = _SLOWDOWN_C + 3.0  # the slowdown is *because* it is past the limit
            self.temp_c = max(self.temp_c, _SLOWDOWN_C + 1.0)
            self.temp_c += (target_t - self.temp_c) * min(1.0, dt / 3.0)
            self.throttle = ["hw slowdown", "hw thermal slowdown"]
            want_clock = p.sm_clock_max_mhz * _HOT_CLOCK
            self.power_w = min(self.power_w, p.power_limit_w * 0.6)
        else:
            self.temp_c += (target_t - self.temp_c) * min(1.0, dt / 20.0)
        tau = 1.0 if self.overheated else 3.0  # a HW slowdown cuts clocks at once
        self.sm_clock_mhz += (want_clock - self.sm_clock_mhz) * min(1.0, dt / tau)
        # only the thermal slowdown slows the simulated steps (the power cap's clock is the
        # profile's normal full-load clock)
        e.clock_factor = (p.sm_clock_max_mhz / max(1.0, self.sm_clock_mhz)
                          if self.overheated else 1.0)
        self.energy_j += self.power_w * dt

    def activity(self) -> dict[str, Any]:
        """The GPM-shaped activity fields (see the module doc), 0..1."""
        e = self.engine
        busiest = max(self.dram_active, self.tensor_active)
        batch_frac = min(1.0, e.last_batch / max(1, e.settings.max_num_seqs))
        # while a step runs its kernels keep warps on most SMs (memory-bound ones too), the
        # more so the more rows the batch spreads over them
        fill = 0.55 + 0.35 * min(1.0, e.last_batch / 32)
        sm = min(1.0, max(0.9 * busiest, self.util * fill))
        hot = self.overheated
        return {
            "sm_active": round(sm, 3),
            "sm_occupancy": round(sm * (0.25 + 0.35 * batch_frac), 3),
            "tensor_active": round(self.tensor_active, 3),
            "dram_active": round(self.dram_active, 3),
            "fp16_active": round(self.tensor_active / 7, 3),
            "nvlink_tx_bytes_s": None,
            "nvlink_rx_bytes_s": None,
            "activity_source": "demo",
            "activity_note": None,
            # violation status: the share of the last interval a limit held the clocks down
            "throttle_time": {"power": 1.0 if "power cap" in self.throttle else 0.0,
                              "thermal": 1.0 if hot else 0.0},
        }

    def record(self) -> dict[str, Any]:
        """The GPU as ``GpuRecord`` fields (JSON), source ``demo``."""
        p = self.engine.profile
        used = self.mem_used_bytes
        return {
            "host": "127.0.0.1",
            "index": self.index,
            "source": "demo",
            "uuid": self.uuid,
            "name": self.name,
            "pci_bus_id": f"00000000:{0x18 + 0x10 * self.index:02X}:00.0",
            "util": round(self.util, 3),
            "mem_util": round(min(1.0, self.util * 0.8), 3),
            "mem_used_bytes": used,
            "mem_free_bytes": self.mem_total_bytes - used,
            "mem_reserved_bytes": 0,
            "mem_total_bytes": self.mem_total_bytes,
            "power_w": round(self.power_w, 1),
            "power_limit_w": self.power_limit_w,
            "energy_j": round(self.energy_j, 1),
            "temp_c": round(self.temp_c, 1),
            "temp_slowdown_c": _SLOWDOWN_C,
            "temp_shutdown_c": 92.0,
            "mem_temp_c": round(self.temp_c + 6.0, 1),
            "fan_pct": None,
            "sm_clock_mhz": round(self.sm_clock_mhz),
            "sm_clock_max_mhz": p.sm_clock_max_mhz,
            "mem_clock_mhz": p.mem_clock_max_mhz,
            "mem_clock_max_mhz": p.mem_clock_max_mhz,
            "throttle": list(self.throttle),
            "pcie_tx_bytes_s": None,
            "pcie_rx_bytes_s": None,
            **self.activity(),
            "ecc_corrected": 0,
            "ecc_uncorrected": 0,
            "xid": None,
            "mig_mode": False,
            "mig_instances": [],
            "extra": {},
            "processes": [{
                "pid": os.getpid(),
                "name": f"{self.engine.kind} (llmtop demo)",
                "used_bytes": used - 512 * 1024 * 1024,
                "engine_target": self.target_name,
            }],
            "error": None,
        }
