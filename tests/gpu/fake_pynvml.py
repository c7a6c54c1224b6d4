"""A scripted stand-in for nvidia-ml-py's ``pynvml`` module (tests and benchmarks only).

It follows the real module's function names, argument order, return shapes and exception
classes (checked against nvidia-ml-py 13.x ``pynvml.py``):

- ``NVMLError`` with ``.value`` and one subclass per error code (``NVMLError_NotSupported``,
  ``NVMLError_GpuIsLost``, ...); constructing ``NVMLError(code)`` gives the subclass.
- ``nvmlDeviceGetMemoryInfo(handle, version=None)`` returns a ``c_nvmlMemory_t``-like object
  (``total/free/used``) or, with ``version=nvmlMemory_v2``, one with ``reserved`` too.
- ``nvmlDeviceGetUtilizationRates`` -> ``.gpu/.memory`` in percent; power in mW; energy in
  mJ; PCIe throughput in KB/s; ``nvmlDeviceGetMigMode`` -> ``[current, pending]``;
  running processes -> objects with ``.pid/.usedGpuMemory/.gpuInstanceId/.computeInstanceId``.

Script a device with keyword values, make any function fail for one device with
``dev.fail("nvmlDeviceGetFanSpeed", NVMLError_NotSupported)``, mark it lost with
``dev.lost = True``, and make the whole library fail with ``FakeNvml(init_error=...)``.
``FakeNvml.calls`` counts every call by function name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FakeDevice",
    "FakeMigDevice",
    "FakeNvml",
    "FakeProc",
    "NVMLError",
    "NVMLError_DriverNotLoaded",
    "NVMLError_FunctionNotFound",
    "NVMLError_GpuIsLost",
    "NVMLError_LibRmVersionMismatch",
    "NVMLError_LibraryNotFound",
    "NVMLError_NoPermission",
    "NVMLError_NotFound",
    "NVMLError_NotSupported",
    "NVMLError_Uninitialized",
    "NVMLError_Unknown",
    "NVMLLibraryMismatchError",
]

# --- constants (same values as pynvml) -------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
nvmlMemory_v2 = 0x02000028
nvmlTemperature_v1 = 0x100000C

nvmlClocksEventReasonGpuIdle = 0x001
nvmlClocksEventReasonApplicationsClocksSetting = 0x002
nvmlClocksEventReasonSwPowerCap = 0x004
nvmlClocksEventReasonHwSlowdown = 0x008
nvmlClocksEventReasonSyncBoost = 0x010
nvmlClocksEventReasonSwThermalSlowdown = 0x020
nvmlClocksEventReasonHwThermalSlowdown = 0x040
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x080
nvmlClocksEventReasonDisplayClockSetting = 0x100
nvmlClocksEventReasonNone = 0

_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


# --- exceptions ------------------------------------------------------------------------------
class NVMLError(Exception):
    """Base class; ``NVMLError(code)`` returns the subclass for that code, as pynvml does."""

    _by_value: dict[int, type[NVMLError]] = {}
    code = NVML_ERROR_UNKNOWN

    def __new__(cls, value: int | None = None):
        if cls is NVMLError and value is not None:
            cls = NVMLError._by_value.get(value, NVMLError)
        obj = Exception.__new__(cls)
        obj.value = cls.code if value is None else value
        return obj

    def __init__(self, value: int | None = None):
        super().__init__()

    def __str__(self) -> str:
        return _STRINGS.get(self.value, f"NVML Error with code {self.value}")


def _err(name: str, code: int) -> type[NVMLError]:
    cls = type(name, (NVMLError,), {"code": code})
    NVMLError._by_value[code] = cls
    return cls


NVMLError_Uninitialized = _err("NVMLError_Uninitialized", NVML_ERROR_UNINITIALIZED)
NVMLError_NotSupported = _err("NVMLError_NotSupported", NVML_ERROR_NOT_SUPPORTED)
NVMLError_NoPermission = _err("NVMLError_NoPermission", NVML_ERROR_NO_PERMISSION)
NVMLError_NotFound = _err("NVMLError_NotFound", NVML_ERROR_NOT_FOUND)
NVMLError_DriverNotLoaded = _err("NVMLError_DriverNotLoaded", NVML_ERROR_DRIVER_NOT_LOADED)
NVMLError_LibraryNotFound = _err("NVMLError_LibraryNotFound", NVML_ERROR_LIBRARY_NOT_FOUND)
NVMLError_FunctionNotFound = _err("NVMLError_FunctionNotFound", NVML_ERROR_FUNCTION_NOT_FOUND)
NVMLError_GpuIsLost = _err("NVMLError_GpuIsLost", NVML_ERROR_GPU_IS_LOST)
NVMLError_LibRmVersionMismatch = _err(
    "NVMLError_LibRmVersionMismatch", NVML_ERROR_LIB_RM_VERSION_MISMATCH
)
NVMLError_Unknown = _err("NVMLError_Unknown", NVML_ERROR_UNKNOWN)


class NVMLLibraryMismatchError(Exception):
    """pynvml raises this (not an NVMLError) when an unversioned call hits an older driver."""


# --- return shapes ---------------------------------------------------------------------------
@dataclass
class c_nvmlMemory_t:
    total: int
    free: int
    used: int


@dataclass
class c_nvmlMemory_v2_t:
    version: int
    total: int
    reserved: int
    free: int
    used: int


@dataclass
class c_nvmlUtilization_t:
    gpu: int
    memory: int


@dataclass
class nvmlPciInfo_t:
    busId: bytes
    busIdLegacy: bytes = b""
    domain: int = 0
    bus: int = 0
    device: int = 0


@dataclass
class FakeProc:
    """What ``nvmlDeviceGet*RunningProcesses`` returns (pynvml's friendly object)."""

    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


GiB = 1024**3


@dataclass
class FakeMigDevice:
    """A MIG instance handle."""

    uuid: str
    name: str
    compute: list[FakeProc] = field(default_factory=list)
    graphics: list[FakeProc] = field(default_factory=list)


@dataclass
class FakeDevice:
    """One scripted GPU. Values are in NVML's units (mW, mJ, KB/s, percent, MHz)."""

    uuid: str = "GPU-00000000-1111-2222-3333-444444444444"
    name: str = "NVIDIA H100 80GB HBM3"
    pci_bus_id: str = "00000000:17:00.0"
    util_gpu: int = 87
    util_mem: int = 41
    mem_total: int = 80 * GiB
    mem_used: int = 60 * GiB
    mem_reserved: int = 512 * 1024**2
    power_mw: int = 412_345
    power_limit_mw: int = 700_000
    energy_mj: int = 123_456_789
    temp_c: int = 61
    temp_slowdown_c: int = 87
    temp_shutdown_c: int = 92
    fan_pct: int = 35
    sm_clock: int = 1755
    mem_clock: int = 2619
    sm_clock_max: int = 1980
    mem_clock_max: int = 2619
    clock_events: int = 0
    pcie_tx_kbs: int = 2_000
    pcie_rx_kbs: int = 30_000
    ecc_corrected: int = 3
    ecc_uncorrected: int = 0
    mig_mode: tuple[int, int] = (0, 0)
    mig: list[FakeMigDevice | None] = field(default_factory=list)
    """MIG slots; None = empty slot (NVML answers NotFound)."""
    compute: list[FakeProc] = field(default_factory=list)
    graphics: list[FakeProc] = field(default_factory=list)
    lost: bool = False
    errors: dict[str, type[NVMLError] | NVMLError] = field(default_factory=dict)

    @property
    def mem_free(self) -> int:
        return self.mem_total - self.mem_used - self.mem_reserved

    def fail(self, fn: str, error: type[NVMLError] | NVMLError = NVMLError_NotSupported) -> None:
        """Make ``fn`` raise ``error`` for this device (``ok(fn)`` undoes it)."""
        self.errors[fn] = error

    def ok(self, fn: str) -> None:
        self.errors.pop(fn, None)


class FakeNvml:
    """The fake module: pass an instance as ``NvmlSampler(nvml=...)``."""

    # exception classes and constants, reachable as attributes like on the real module
    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NoPermission = NVMLError_NoPermission
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVMLError_LibRmVersionMismatch = NVMLError_LibRmVersionMismatch
    NVMLError_Unknown = NVMLError_Unknown
    NVMLLibraryMismatchError = NVMLLibraryMismatchError
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
    NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_PCIE_UTIL_TX_BYTES = NVML_PCIE_UTIL_TX_BYTES
    NVML_PCIE_UTIL_RX_BYTES = NVML_PCIE_UTIL_RX_BYTES
    NVML_MEMORY_ERROR_TYPE_CORRECTED = NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = NVML_VOLATILE_ECC
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE
    nvmlMemory_v2 = nvmlMemory_v2
    nvmlTemperature_v1 = nvmlTemperature_v1

    def __init__(
        self,
        devices: list[FakeDevice] | None = None,
        *,
        init_error: type[NVMLError] | NVMLError | None = None,
        count_error: type[NVMLError] | NVMLError | None = None,
        missing: set[str] | None = None,
    ):
        self.devices = [FakeDevice()] if devices is None else devices
        self.init_error = init_error
        self.count_error = count_error
        self.missing = set(missing or ())
        """Function names this 'older pynvml' lacks (AttributeError, like a real old module)."""
        self.calls: Counter[str] = Counter()
        self.initialized = 0

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # -- helpers --
    def _call(self, fn: str, handle: Any = None) -> None:
        self.calls[fn] += 1
        if self.initialized <= 0:
            raise NVMLError_Uninitialized()
        if isinstance(handle, FakeDevice):
            if handle.lost:
                raise NVMLError_GpuIsLost()
            err = handle.errors.get(fn)
            if err is not None:
                raise err() if isinstance(err, type) else err

    # -- library --
    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            e = self.init_error
            raise e() if isinstance(e, type) else e
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self._call("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call("nvmlSystemGetDriverVersion")
        return "580.65.06"

    def nvmlDeviceGetCount(self) -> int:
        self._call("nvmlDeviceGetCount")
        if self.count_error is not None:
            e = self.count_error
            raise e() if isinstance(e, type) else e
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        self._call("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise NVMLError(2)  # invalid argument
        dev = self.devices[index]
        self._call("nvmlDeviceGetHandleByIndex", dev)
        return dev

    # -- identity --
    def nvmlDeviceGetUUID(self, h: Any) -> str:
        self._call("nvmlDeviceGetUUID", h)
        return h.uuid

    def nvmlDeviceGetName(self, h: Any) -> str:
        self._call("nvmlDeviceGetName", h)
        return h.name

    def nvmlDeviceGetPciInfo(self, h: FakeDevice) -> nvmlPciInfo_t:
        self._call("nvmlDeviceGetPciInfo", h)
        return nvmlPciInfo_t(busId=h.pci_bus_id.encode(), busIdLegacy=h.pci_bus_id.encode())

    # -- load --
    def nvmlDeviceGetUtilizationRates(self, h: FakeDevice) -> c_nvmlUtilization_t:
        self._call("nvmlDeviceGetUtilizationRates", h)
        return c_nvmlUtilization_t(gpu=h.util_gpu, memory=h.util_mem)

    def nvmlDeviceGetMemoryInfo(self, h: FakeDevice, version: int | None = None):
        if version:
            self._call("nvmlDeviceGetMemoryInfo_v2", h)
            return c_nvmlMemory_v2_t(
                version=version,
                total=h.mem_total,
                reserved=h.mem_reserved,
                free=h.mem_free,
                used=h.mem_used,
            )
        self._call("nvmlDeviceGetMemoryInfo", h)
        return c_nvmlMemory_t(total=h.mem_total, free=h.mem_total - h.mem_used, used=h.mem_used)

    def nvmlDeviceGetPowerUsage(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetPowerUsage", h)
        return h.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        return h.power_limit_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetTotalEnergyConsumption", h)
        return h.energy_mj

    def nvmlDeviceGetTemperatureV(
        self, h: FakeDevice, sensor: int, version: int = nvmlTemperature_v1
    ) -> int:
        self._call("nvmlDeviceGetTemperatureV", h)
        return h.temp_c

    def nvmlDeviceGetTemperature(self, h: FakeDevice, sensor: int) -> int:
        self._call("nvmlDeviceGetTemperature", h)
        return h.temp_c

    def nvmlDeviceGetTemperatureThreshold(self, h: FakeDevice, threshold: int) -> int:
        self._call("nvmlDeviceGetTemperatureThreshold", h)
        if threshold == NVML_TEMPERATURE_THRESHOLD_SLOWDOWN:
            return h.temp_slowdown_c
        if threshold == NVML_TEMPERATURE_THRESHOLD_SHUTDOWN:
            return h.temp_shutdown_c
        raise NVMLError_NotSupported()

    def nvmlDeviceGetFanSpeed(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetFanSpeed", h)
        return h.fan_pct

    def nvmlDeviceGetClockInfo(self, h: FakeDevice, type: int) -> int:
        self._call("nvmlDeviceGetClockInfo", h)
        return h.sm_clock if type == NVML_CLOCK_SM else h.mem_clock

    def nvmlDeviceGetMaxClockInfo(self, h: FakeDevice, type: int) -> int:
        self._call("nvmlDeviceGetMaxClockInfo", h)
        return h.sm_clock_max if type == NVML_CLOCK_SM else h.mem_clock_max

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
        return h.clock_events

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeDevice) -> int:
        self._call("nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return h.clock_events

    def nvmlDeviceGetPcieThroughput(self, device: FakeDevice, counter: int) -> int:
        self._call("nvmlDeviceGetPcieThroughput", device)
        return device.pcie_tx_kbs if counter == NVML_PCIE_UTIL_TX_BYTES else device.pcie_rx_kbs

    def nvmlDeviceGetTotalEccErrors(
        self,
        h: FakeDevice,
        errorType: int,
        counterType: int,
    ) -> int:
        self._call("nvmlDeviceGetTotalEccErrors", h)
        if errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED:
            return h.ecc_corrected
        return h.ecc_uncorrected

    # -- MIG --
    def nvmlDeviceGetMigMode(self, device: FakeDevice) -> list[int]:
        self._call("nvmlDeviceGetMigMode", device)
        return list(device.mig_mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, device: FakeDevice) -> int:
        self._call("nvmlDeviceGetMaxMigDeviceCount", device)
        return len(device.mig)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: FakeDevice, index: int) -> FakeMigDevice:
        self._call("nvmlDeviceGetMigDeviceHandleByIndex", device)
        if not 0 <= index < len(device.mig) or device.mig[index] is None:
            raise NVMLError_NotFound()
        return device.mig[index]  # type: ignore[return-value]

    # -- processes --
    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[FakeProc]:
        self._call("nvmlDeviceGetComputeRunningProcesses", h)
        return list(h.compute)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list[FakeProc]:
        self._call("nvmlDeviceGetGraphicsRunningProcesses", h)
        return list(h.graphics)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: Any) -> list[FakeProc]:
        self._call("nvmlDeviceGetComputeRunningProcesses_v2", handle)
        return list(handle.compute)

    def nvmlDeviceGetGraphicsRunningProcesses_v2(self, handle: Any) -> list[FakeProc]:
        self._call("nvmlDeviceGetGraphicsRunningProcesses_v2", handle)
        return list(handle.graphics)
