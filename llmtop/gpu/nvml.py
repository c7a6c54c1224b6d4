"""Local GPUs through NVML (nvidia-ml-py, the ``pynvml`` module).

``NvmlSampler.sample()`` is synchronous and never raises; the monitor calls ``sample_async()``
once per tick, which runs it in a worker thread; while NVML is down and not due for a retry,
``held_sample()`` answers the held error at once (no thread, no task each tick):

- ``pynvml`` is imported lazily and ``nvmlInit`` runs on the first sample; ``close()`` calls
  ``nvmlShutdown`` once.
- A fatal failure (library not found, driver not loaded, version mismatch, no permission,
  no GPU) becomes ``GpuSample.error``: one line with reason and hint (``gpu.reasons``).
  Init is retried at most every ``retry_s`` (30 s), so a driver that comes back is found.
- Every NVML call goes through :func:`nvml_query`: a per-field ``NVMLError`` (NotSupported,
  NoPermission, anything) becomes None. ``GpuIsLost`` marks that GPU's record
  (``error = "GPU is lost (fell off the bus?)"``) and the other GPUs keep working.
- A call that answers NotSupported is not asked again for that GPU (keeps ticks cheap).
  PCIe throughput blocks for milliseconds inside NVML, so it is read at most every
  ``pcie_every_s``; total energy (milliseconds of CPU per call) and the MIG mode (it changes
  only with a GPU reset) at most every ``slow_every_s`` (30 s); the costs per call are in
  ``docs/benchmarks.md`` ("GPUs", ``benchmarks/nvml_calls.py``). What they answer, a failed
  read too, is held between.
- Real activity (``_activity``): GPM where the GPU has it (``gpu.gpm``, per MIG GPU instance
  too), per-process SM time, NVLink counters (every ``pcie_every_s``) and violation times
  (``gpu.activity``); its cost per sample: ``benchmarks/gpu_sampling.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from llmtop.config import Target
from llmtop.gpu import proc as procfs
from llmtop.gpu import reasons
from llmtop.gpu.activity import Fallbacks
from llmtop.gpu.attribution import Attributor
from llmtop.gpu.errors import GpuLost, driver_library_or_raise, is_error, never_answers
from llmtop.gpu.gpm import GpmDevice
from llmtop.gpu.values import c as _c
from llmtop.gpu.values import integer as _int
from llmtop.gpu.values import num as _num
from llmtop.gpu.values import text as _s
from llmtop.model import GpuProcess, GpuRecord, GpuSample

__all__ = ["CLOSED", "NOT_VISIBLE", "GpuLost", "NvmlSampler", "nvml_query"]

NOT_VISIBLE = "pid not visible from this namespace"
CLOSED = "GPU unavailable: GPU sampler closed"

_MISSING = object()


_is = is_error


def nvml_query(nvml: Any, fn: str, *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """Call ``nvml.<fn>(*args)``; any NVML (or other) error gives ``default``.

    The one exception that escapes is :class:`GpuLost`, for the caller to mark the device.
    A function missing from an older ``pynvml`` also gives ``default``.
    """
    func = getattr(nvml, fn, None)
    if func is None:
        return default
    try:
        return func(*args, **kwargs)
    except Exception as e:
        if _is(nvml, e, "NVMLError_GpuIsLost"):
            raise GpuLost(fn) from e
        return default


class _NoHandle(Exception):
    """NVML refused a device handle (not lost): the message is the record's error."""


def _handle_error(nvml: Any, exc: BaseException) -> str:
    if _is(nvml, exc, "NVMLError_NoPermission"):
        return "no permission to open this GPU (check access to /dev/nvidia*)"
    return f"cannot open this GPU ({str(exc).strip() or type(exc).__name__})"


class _Dev:
    """What we keep per GPU index between ticks."""

    __slots__ = ("fb", "gpm", "handle", "held", "lost_at", "static", "unsupported")

    def __init__(self, handle: Any, nvml: Any = None):
        self.handle = handle
        self.gpm: GpmDevice | None = None
        """GPM state, made once the GPU's name is known; its samples freed on loss/close."""
        self.fb = Fallbacks(nvml)
        self.static: dict[str, Any] = {}
        self.unsupported: set[str] = set()
        self.lost_at: float | None = None
        self.held: dict[str, tuple[float, Any]] = {}
        """Costly queries: key -> (when read, what it answered, None included)."""


class NvmlSampler:
    """Samples every local GPU once per call; see the module docstring."""

    def __init__(
        self,
        targets: Sequence[Target] = (),
        *,
        nvml: ModuleType | Any | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        retry_s: float = 30.0,
        pcie_every_s: float = 5.0,
        slow_every_s: float = 30.0,
        hostname: str | None = None,
        attributor: Attributor | None = None,
        proc: str = procfs.PROC,
        host_pid_namespace: bool | None = None,
    ):
        self._nvml: Any = nvml
        self._targets = tuple(targets)
        self._clock = clock
        self._wall = wall
        self.retry_s = retry_s
        self.pcie_every_s = pcie_every_s
        self.slow_every_s = slow_every_s
        self.host = hostname if hostname is not None else socket.gethostname()
        self._attributor = attributor if attributor is not None else Attributor(proc=proc)
        self._proc = proc
        self._names: dict[int, tuple[int, str | None, str | None, str]] = {}
        if host_pid_namespace is None:
            host_pid_namespace = procfs.in_initial_pid_namespace(proc) is not False
        self._pids_match = host_pid_namespace
        """False inside a container's PID namespace: NVML's host pids cannot be looked up."""
        self._lock = threading.Lock()
        self._initialized = False
        self._closed = False
        self._fatal: str | None = None
        self._next_try: float = float("-inf")
        self._devs: dict[int, _Dev] = {}
        self.init_attempts = 0
        """How many times ``nvmlInit`` was tried (tests check the retry timing)."""

    # -- lifecycle ---------------------------------------------------------------------------

    def _load(self) -> Any:
        if self._nvml is None:
            driver_library_or_raise()
            import pynvml  # type: ignore[import-untyped]  # lazy: no driver needed to import

            self._nvml = pynvml
        return self._nvml

    def _try_init(self, now: float) -> str | None:
        """Init NVML if needed. Returns an error line, or None when ready."""
        if self._initialized:
            return None
        if now < self._next_try and self._fatal is not None:
            return self._fatal
        self._next_try = now + self.retry_s
        self.init_attempts += 1
        try:
            nvml = self._load()
            nvml.nvmlInit()
        except Exception as e:  # ImportError, NVMLError_*, OSError: all become one line
            self._fatal = reasons.init_error_reason(e)
            return self._fatal
        self._initialized = True
        self._fatal = None
        self._drop_devs()
        return None

    def _fail(self, exc: BaseException | None, line: str | None, now: float) -> str:
        """A fatal error after init: shut NVML down and retry init later."""
        self._shutdown()
        self._fatal = line or reasons.init_error_reason(exc or Exception("unknown"))
        self._next_try = now + self.retry_s
        return self._fatal

    def _drop_devs(self) -> None:
        for dev in self._devs.values():
            if dev.gpm is not None:
                dev.gpm.close()  # GPM samples are freed before NVML shuts down
        self._devs.clear()

    def _shutdown(self) -> None:
        if self._initialized:
            self._initialized = False
            self._drop_devs()
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    async def aclose(self) -> None:
        """``close``, which never blocks on a sample in flight."""
        self.close()

    def close(self) -> None:
        """Shut NVML down (once); later ``sample()`` calls report the sampler closed.

        Never blocks on a sample in flight (a lost GPU can stall NVML for seconds): the
        sampling thread then shuts NVML down itself when it finishes.
        """
        self._closed = True
        if self._lock.acquire(blocking=False):
            try:
                self._shutdown()
            finally:
                self._lock.release()

    # -- sampling ----------------------------------------------------------------------------

    def sample(self) -> GpuSample:
        """One sample of every GPU; never raises."""
        t0 = time.perf_counter()
        t_wall, t_mono = self._wall(), self._clock()
        with self._lock:
            try:
                gpus, error = self._sample(t_mono)
            except Exception as e:  # belt and braces: a bug here must not kill the tick
                gpus, error = [], f"GPU unavailable: internal error ({type(e).__name__}: {e})"
            if self._closed:  # close() came while we were sampling
                self._shutdown()
        return GpuSample(
            t_wall=t_wall,
            t_mono=t_mono,
            gpus=gpus,
            error=error,
            cost_s=time.perf_counter() - t0,
        )

    async def sample_async(self) -> GpuSample:
        """``sample`` for the monitor's event loop: ``held_sample()`` when NVML need not be
        called, else ``sample`` in a worker thread (NVML calls can block)."""
        held = self.held_sample()
        return held if held is not None else await asyncio.to_thread(self.sample)

    def held_sample(self) -> GpuSample | None:
        """While NVML is down (not installed, no driver, no GPU) and its retry is not due,
        or the sampler is closed: the sample ``sample`` would give, made without NVML and
        without a thread (the monitor feeds it at once, no task each tick). Else None."""
        t0 = time.perf_counter()
        t_wall, t_mono = self._wall(), self._clock()
        held = self._held_error(t_mono)
        if held is None:
            return None
        return GpuSample(t_wall=t_wall, t_mono=t_mono, gpus=[], error=held,
                         cost_s=time.perf_counter() - t0)

    def set_targets(self, targets: Sequence[Target]) -> None:
        """The targets GPU processes are attributed to (engines a later search found)."""
        self._targets = tuple(targets)

    def _held_error(self, now: float) -> str | None:
        """The error ``sample`` would answer at ``now`` without calling NVML, or None."""
        if self._lock.locked():
            return None
        if self._closed:
            return CLOSED
        if not self._initialized and self._fatal is not None and now < self._next_try:
            return self._fatal
        return None

    def _sample(self, now: float) -> tuple[list[GpuRecord], str | None]:
        if self._closed:
            return [], CLOSED
        err = self._try_init(now)
        if err is not None:
            return [], err
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as e:
            return [], self._fail(e, None, now)
        if count <= 0:
            return [], self._fail(None, reasons.NO_GPUS, now)
        records = [self._device(i, now) for i in range(count)]
        procs = [p for r in records for p in r.processes]
        if len(self._names) > 4096:  # forget pids no GPU holds any more
            live = {p.pid for p in procs}
            self._names = {k: v for k, v in self._names.items() if k in live}
        if procs and self._targets:
            self._attributor.attribute(procs, self._targets)
        if all(r.error == reasons.GPU_LOST for r in records):
            return records, reasons.GPU_LOST_ALL
        if all(r.error for r in records):
            return records, f"GPU unavailable: {records[0].error}"
        return records, None

    def _handle(self, index: int, now: float) -> _Dev:
        """The device's cached handle; a lost GPU's handle is fetched afresh after retry_s.

        Raises ``_NoHandle`` (not cached, so retried next tick) when NVML refuses the handle.
        """
        dev = self._devs.get(index)
        if dev is not None and (dev.lost_at is None or now - dev.lost_at < self.retry_s):
            return dev
        lost = False
        try:
            handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:
            if not _is(self._nvml, e, "NVMLError_GpuIsLost"):
                raise _NoHandle(_handle_error(self._nvml, e)) from e
            handle, lost = None, True
        if dev is not None and dev.gpm is not None:
            dev.gpm.close()
        fresh = _Dev(handle, self._nvml)
        if dev is not None:  # retrying a lost GPU: keep what we knew about it
            fresh.static = dict(dev.static)
        fresh.lost_at = now if lost else None
        self._devs[index] = fresh
        return fresh

    def _device(self, index: int, now: float) -> GpuRecord:
        rec = GpuRecord(host=self.host, index=index, source="nvml")
        try:
            dev = self._handle(index, now)
            if dev.lost_at is not None:
                raise GpuLost("still lost")
            self._fill(rec, dev, now)
        except _NoHandle as e:
            rec.error = str(e)
        except GpuLost:
            lost = self._devs.get(index)
            if lost is not None:
                if lost.gpm is not None:
                    lost.gpm.close()
                if lost.lost_at is None:
                    lost.lost_at = now
                rec.uuid = _s(lost.static.get("uuid"))
                rec.name = _s(lost.static.get("name"))
                rec.pci_bus_id = _s(lost.static.get("pci"))
            rec.error = reasons.GPU_LOST
            rec.processes = []
        return rec

    def _q(self, dev: _Dev, key: str, fn: str, *args: Any, **kw: Any) -> Any:
        """A per-field query; NotSupported is remembered and not asked again."""
        if key in dev.unsupported:
            return None
        func = getattr(self._nvml, fn, None)
        if func is None:
            dev.unsupported.add(key)
            return None
        try:
            return func(dev.handle, *args, **kw)
        except Exception as e:
            if _is(self._nvml, e, "NVMLError_GpuIsLost"):
                raise GpuLost(fn) from e
            if never_answers(self._nvml, e):
                dev.unsupported.add(key)
            return None

    def _static(self, dev: _Dev, key: str, fn: str, *args: Any) -> Any:
        """A value that does not change while the driver is loaded: read once."""
        v = dev.static.get(key, _MISSING)
        if v is _MISSING:
            v = self._q(dev, key, fn, *args)
            if v is not None or key in dev.unsupported:
                dev.static[key] = v
        return v

    def _held(self, dev: _Dev, key: str, now: float, every: float, fn: str, *args: Any) -> Any:
        """A costly query, asked at most every ``every`` seconds; its answer (a failed read's
        None too) is held in between."""
        got = dev.held.get(key)
        if got is not None and now - got[0] < every:
            return got[1]
        v = self._q(dev, key, fn, *args)
        dev.held[key] = (now, v)
        return v

    def _fill(self, rec: GpuRecord, dev: _Dev, now: float) -> None:
        n = self._nvml
        rec.uuid = _s(self._static(dev, "uuid", "nvmlDeviceGetUUID"))
        rec.name = _s(self._static(dev, "name", "nvmlDeviceGetName"))
        if "pci" not in dev.static:
            info = self._q(dev, "pci", "nvmlDeviceGetPciInfo")
            if info is not None or "pci" in dev.unsupported:
                bus = getattr(info, "busId", None) or getattr(info, "busIdLegacy", None)
                dev.static["pci"] = _s(bus)
        rec.pci_bus_id = dev.static.get("pci")

        util = self._q(dev, "util", "nvmlDeviceGetUtilizationRates")
        if util is not None:
            rec.util = _num(getattr(util, "gpu", None), 0.01)
            rec.mem_util = _num(getattr(util, "memory", None), 0.01)

        mem = None
        v2 = getattr(n, "nvmlMemory_v2", None)
        if v2 is not None:
            mem = self._q(dev, "mem_v2", "nvmlDeviceGetMemoryInfo", version=v2)
        if mem is None:
            mem = self._q(dev, "mem", "nvmlDeviceGetMemoryInfo")
        if mem is not None:
            rec.mem_total_bytes = _int(getattr(mem, "total", None))
            rec.mem_free_bytes = _int(getattr(mem, "free", None))
            rec.mem_used_bytes = _int(getattr(mem, "used", None))
            rec.mem_reserved_bytes = _int(getattr(mem, "reserved", None))

        rec.power_w = _num(self._q(dev, "power", "nvmlDeviceGetPowerUsage"), 0.001)
        rec.power_limit_w = _num(
            self._q(dev, "power_limit", "nvmlDeviceGetEnforcedPowerLimit"), 0.001
        )
        rec.energy_j = _num(
            self._held(dev, "energy", now, self.slow_every_s,
                       "nvmlDeviceGetTotalEnergyConsumption"), 0.001
        )

        sensor = _c(n, "NVML_TEMPERATURE_GPU", 0)
        temp = self._q(dev, "temp_v", "nvmlDeviceGetTemperatureV", sensor)
        if temp is None:
            temp = self._q(dev, "temp", "nvmlDeviceGetTemperature", sensor)
        rec.temp_c = _num(temp)
        rec.temp_slowdown_c = _num(
            self._static(
                dev,
                "temp_slowdown",
                "nvmlDeviceGetTemperatureThreshold",
                _c(n, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
            )
        )
        rec.temp_shutdown_c = _num(
            self._static(
                dev,
                "temp_shutdown",
                "nvmlDeviceGetTemperatureThreshold",
                _c(n, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
            )
        )
        rec.fan_pct = _num(self._q(dev, "fan", "nvmlDeviceGetFanSpeed"))

        sm, mclk = _c(n, "NVML_CLOCK_SM", 1), _c(n, "NVML_CLOCK_MEM", 2)
        rec.sm_clock_mhz = _num(self._q(dev, "sm_clock", "nvmlDeviceGetClockInfo", sm))
        rec.mem_clock_mhz = _num(self._q(dev, "mem_clock", "nvmlDeviceGetClockInfo", mclk))
        rec.sm_clock_max_mhz = _num(
            self._static(dev, "sm_clock_max", "nvmlDeviceGetMaxClockInfo", sm)
        )
        rec.mem_clock_max_mhz = _num(
            self._static(dev, "mem_clock_max", "nvmlDeviceGetMaxClockInfo", mclk)
        )

        mask = self._q(dev, "events", "nvmlDeviceGetCurrentClocksEventReasons")
        if mask is None:
            mask = self._q(dev, "throttle", "nvmlDeviceGetCurrentClocksThrottleReasons")
        rec.throttle = reasons.decode_clock_events(mask)

        if dev.gpm is None or not dev.gpm.gives_pcie:  # GPM's PCIe rates cost no blocking call
            every = self.pcie_every_s
            tx = self._held(dev, "pcie_tx", now, every, "nvmlDeviceGetPcieThroughput",
                            _c(n, "NVML_PCIE_UTIL_TX_BYTES", 0))
            rx = self._held(dev, "pcie_rx", now, every, "nvmlDeviceGetPcieThroughput",
                            _c(n, "NVML_PCIE_UTIL_RX_BYTES", 1))
            rec.pcie_tx_bytes_s, rec.pcie_rx_bytes_s = _num(tx, 1024.0), _num(rx, 1024.0)  # KB/s

        volatile = _c(n, "NVML_VOLATILE_ECC", 0)
        rec.ecc_corrected = _int(
            self._q(
                dev,
                "ecc_corr",
                "nvmlDeviceGetTotalEccErrors",
                _c(n, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0),
                volatile,
            )
        )
        rec.ecc_uncorrected = _int(
            self._q(
                dev,
                "ecc_uncorr",
                "nvmlDeviceGetTotalEccErrors",
                _c(n, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                volatile,
            )
        )

        mig_handles = self._mig(rec, dev, now)
        rec.processes = self._processes(dev, mig_handles)
        self._activity(rec, dev, now, mig_handles)

    def _activity(self, rec: GpuRecord, dev: _Dev, now: float, mig_handles: list[Any]) -> None:
        """GPM where the GPU has it (per MIG GPU instance too); per-process SM time, NVLink
        counters and violation times from the older calls (``gpu.activity``)."""
        if dev.gpm is None:
            dev.gpm = GpmDevice(self._nvml, rec.name)
        if rec.mig_mode:
            gis = [nvml_query(self._nvml, "nvmlDeviceGetGpuInstanceId", mh) for mh in mig_handles]
            rec.mig_activity = dev.gpm.read_mig(dev.handle, [g for g in gis if g is not None], now)
            values = None
        else:
            values = dev.gpm.read(dev.handle, now)
        if dev.gpm.supported:
            rec.activity_source = "gpm"
            for k, v in (values or {}).items():
                if v is not None or k.startswith(("sm_", "tensor", "dram", "fp16", "nvlink")):
                    setattr(rec, k, v)  # GPM's PCIe rates replace the held ones only when read
        rec.activity_note = dev.gpm.note
        fb = dev.fb
        if not rec.mig_mode and rec.processes:
            util = fb.process_sm(dev.handle, self._wall(), now)
            if util is not None:
                for p in rec.processes:
                    p.sm_util = util.get(p.pid) if p.pid is not None else None
        if rec.nvlink_tx_bytes_s is None and rec.nvlink_rx_bytes_s is None:
            rec.nvlink_tx_bytes_s, rec.nvlink_rx_bytes_s = fb.nvlink(dev.handle, now,
                                                                     self.pcie_every_s)
        rec.throttle_time = fb.throttle_time(dev.handle, now)

    def _mig(self, rec: GpuRecord, dev: _Dev, now: float) -> list[Any]:
        mode = self._held(dev, "mig_mode", now, self.slow_every_s, "nvmlDeviceGetMigMode")
        if mode is None:
            return []
        try:
            current = mode[0]
        except (TypeError, IndexError, KeyError):
            current = mode
        rec.mig_mode = _int(current) == _c(self._nvml, "NVML_DEVICE_MIG_ENABLE", 1)
        if not rec.mig_mode:
            return []
        n = self._nvml
        handles: list[Any] = []
        count = _int(self._q(dev, "mig_count", "nvmlDeviceGetMaxMigDeviceCount")) or 0
        for i in range(count):
            mh = nvml_query(n, "nvmlDeviceGetMigDeviceHandleByIndex", dev.handle, i)
            if mh is None:  # an empty slot answers NotFound
                continue
            handles.append(mh)
            name = _s(nvml_query(n, "nvmlDeviceGetName", mh))
            uuid = _s(nvml_query(n, "nvmlDeviceGetUUID", mh))
            rec.mig_instances.append(" ".join(x for x in (name, uuid) if x) or f"MIG {i}")
        return handles

    def _processes(self, dev: _Dev, mig_handles: list[Any]) -> list[GpuProcess]:
        n = self._nvml
        raw: list[Any] = []
        for key, fn in (
            ("procs_compute", "nvmlDeviceGetComputeRunningProcesses"),
            ("procs_graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
        ):
            got = None if key in dev.unsupported else self._q(dev, key, fn)
            if key in dev.unsupported:  # a driver without the _v3 entry points: use _v2
                key, fn = f"{key}_v2", f"{fn}_v2"
                got = self._q(dev, key, fn)
            if got:
                raw.extend(got)
            for mh in mig_handles:  # in MIG mode per-instance lists may be all we may read
                got = nvml_query(n, fn, mh)
                if got:
                    raw.extend(got)
        by_pid: dict[int, GpuProcess] = {}
        for info in raw:
            pid = _int(getattr(info, "pid", None))
            if pid is None:
                continue
            used = _int(getattr(info, "usedGpuMemory", None))
            p = by_pid.get(pid)
            if p is None:
                by_pid[pid] = self._describe(pid, used)
            elif used is not None and (p.used_bytes is None or used > p.used_bytes):
                p.used_bytes = used
        return sorted(by_pid.values(), key=lambda p: -(p.used_bytes or 0))

    def _describe(self, pid: int, used: int | None) -> GpuProcess:
        """Name and command line from /proc, cached per pid while ``/proc/<pid>`` is the same
        directory (its inode time changes when the pid is reused)."""
        try:
            st = os.stat(f"{self._proc}/{pid}") if pid > 0 and self._pids_match else None
        except OSError:
            st = None
        if st is None:
            self._names.pop(pid, None)
            return GpuProcess(pid=pid, name=NOT_VISIBLE, used_bytes=used, visible=False)
        key = st.st_ctime_ns
        hit = self._names.get(pid)
        if hit is None or hit[0] != key:
            argv = procfs.read_cmdline(pid, self._proc)
            name = procfs.read_comm(pid, self._proc)
            if argv and not name:
                name = os.path.basename(argv[0])
            # the owner comes with the stat already made: no extra /proc read per sample
            hit = (key, name, " ".join(argv) if argv else None, procfs.user_name(st.st_uid))
            self._names[pid] = hit
        return GpuProcess(pid=pid, name=hit[1], used_bytes=used, cmdline=hit[2], user=hit[3])
