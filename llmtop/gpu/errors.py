"""NVML errors as the GPU sampler sorts them: a lost GPU, a call this GPU will never answer.

- ``GpuLost``: raised when NVML says the device fell off the bus (the caller marks the GPU).
- ``is_error(nvml, exc, name)``: whether ``exc`` is pynvml's ``NVMLError_<name>`` class.
- ``never_answers(nvml, exc)``: NotSupported, FunctionNotFound, an older binding or driver:
  asking again would give the same answer.
- ``error_line(exc)``: an NVML error in a few words, for a one-line note.
- ``driver_library_or_raise()``: ImportError where Linux has no NVML library (before
  ``pynvml`` is imported).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["GpuLost", "driver_library_or_raise", "error_line", "is_error", "never_answers"]


class GpuLost(Exception):
    """NVML said the device fell off the bus (``NVML_ERROR_GPU_IS_LOST``)."""


def is_error(nvml: Any, exc: BaseException, name: str) -> bool:
    """Whether ``exc`` is an instance of ``nvml.<name>`` (False where the binding lacks it)."""
    cls = getattr(nvml, name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


def never_answers(nvml: Any, exc: BaseException) -> bool:
    """True for errors that asking again will not change on this GPU and driver."""
    return (
        isinstance(exc, TypeError)  # an older pynvml without this signature
        or is_error(nvml, exc, "NVMLError_NotSupported")
        or is_error(nvml, exc, "NVMLError_FunctionNotFound")
        or is_error(nvml, exc, "NVMLLibraryMismatchError")  # driver older than pynvml
    )


def error_line(exc: BaseException) -> str:
    """The error's own words (``Not Supported``), else its class name."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text or type(exc).__name__


def driver_library_or_raise() -> None:
    """Raise ImportError where Linux has no NVML library, before importing ``pynvml``.

    ``pynvml`` is a good part of the resident code (``docs/benchmarks.md``, "Where the memory
    goes"); a box without the driver (where it could only fail in ``nvmlInit``) does not pay
    for it. A ``pynvml`` already imported (a test's fake) or another platform goes straight to
    ``pynvml``'s own loading."""
    if "pynvml" in sys.modules or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")  # the name pynvml loads on Linux
    except OSError as e:
        raise ImportError(f"libnvidia-ml.so.1: {e}") from e
