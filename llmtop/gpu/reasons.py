"""GPU error reasons (one line: reason plus hint) and clock-event / throttle decoding.

Pure: no NVML import, no I/O. The NVML sampler maps an exception to a line with
:func:`init_error_reason`; the UI and ``--once --json`` show that line verbatim.
"""

from __future__ import annotations

__all__ = [
    "CLOCK_EVENT_BITS",
    "DEMO_BAD_PAYLOAD",
    "DEMO_NOT_ANSWERING",
    "DRIVER_NOT_LOADED",
    "GPU_LOST",
    "GPU_LOST_ALL",
    "LIBRARY_NOT_FOUND",
    "NO_GPUS",
    "NO_PERMISSION",
    "VERSION_MISMATCH",
    "decode_clock_events",
    "init_error_reason",
    "unavailable_line",
]

LIBRARY_NOT_FOUND = "GPU unavailable: NVML library not found (is the NVIDIA driver installed?)"
DRIVER_NOT_LOADED = (
    "GPU unavailable: NVIDIA driver not loaded (load the nvidia kernel module; "
    "does nvidia-smi work?)"
)
VERSION_MISMATCH = (
    "GPU unavailable: driver/library version mismatch (reboot or reload the nvidia kernel "
    "module after a driver upgrade)"
)
NO_PERMISSION = (
    "GPU unavailable: insufficient permissions to read the GPU "
    "(check access to /dev/nvidia*, or the container's GPU access)"
)
NO_GPUS = "GPU unavailable: no NVIDIA GPU found (NVML sees 0 devices)"
GPU_LOST = "GPU is lost (fell off the bus?)"
"""Per-GPU ``GpuRecord.error`` when NVML reports ``GpuIsLost`` for that device."""
GPU_LOST_ALL = (
    "GPU unavailable: GPU is lost (fell off the bus?); check dmesg for Xid 79, "
    "a GPU reset or reboot is needed"
)
"""``GpuSample.error`` when every GPU is lost."""
DEMO_NOT_ANSWERING = "GPU unavailable: demo GPU endpoint not answering"
DEMO_BAD_PAYLOAD = "GPU unavailable: demo GPU endpoint sent a bad payload"

# (bit, words). Bit values are NVML's nvmlClocksEventReason* / nvmlClocksThrottleReason*.
CLOCK_EVENT_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu idle"),
    (0x002, "applications clocks setting"),
    (0x004, "power cap"),
    (0x008, "hw slowdown"),
    (0x010, "sync boost"),
    (0x020, "thermal slowdown (sw)"),
    (0x040, "hw thermal slowdown"),
    (0x080, "hw power brake"),
    (0x100, "display clocks setting"),
    (0x200, "board limit"),
    (0x400, "reliability"),
)
_KNOWN_MASK = 0
for _bit, _ in CLOCK_EVENT_BITS:
    _KNOWN_MASK |= _bit


def unavailable_line(error: str | None) -> str:
    """The one line shown where GPUs would be: ``GPU unavailable: <reason>``, whether or not
    ``error`` (a sampler's reason, a replayed one, None) already starts that way."""
    if not error:
        return "GPU unavailable: no GPUs reported"
    return error if error.lower().startswith("gpu unavailable") else f"GPU unavailable: {error}"


def decode_clock_events(mask: int | None) -> list[str] | None:
    """Words for an NVML clock-event (throttle) bitmask; ``[]`` = none active, None = unknown.

    Unknown bits are kept as ``"other (0x...)"`` rather than dropped.
    """
    if mask is None:
        return None
    try:
        mask = int(mask)
    except (TypeError, ValueError):
        return None
    words = [w for bit, w in CLOCK_EVENT_BITS if mask & bit]
    rest = mask & ~_KNOWN_MASK
    if rest:
        words.append(f"other (0x{rest:x})")
    return words


_BY_CLASS = {
    "NVMLError_LibraryNotFound": LIBRARY_NOT_FOUND,
    "NVMLError_DriverNotLoaded": DRIVER_NOT_LOADED,
    "NVMLError_LibRmVersionMismatch": VERSION_MISMATCH,
    "NVMLError_NoPermission": NO_PERMISSION,
    "NVMLError_GpuIsLost": GPU_LOST_ALL,
}


def init_error_reason(exc: BaseException) -> str:
    """One line for a fatal NVML failure (init, device count), by exception class name.

    Matching by class name (walking the MRO) works for the real ``pynvml`` and for test fakes.
    """
    if isinstance(exc, ImportError):
        return LIBRARY_NOT_FOUND
    for cls in type(exc).__mro__:
        line = _BY_CLASS.get(cls.__name__)
        if line is not None:
            return line
    text = str(exc).strip() or type(exc).__name__
    return f"GPU unavailable: NVML failed ({text})"
