"""Helpers for GPU payloads parsed from Prometheus text (DCGM exporter, Triton ``nv_gpu_*``).

Pure: no I/O. DCGM marks "no value" with blank sentinels near the top of each type's range;
:func:`clean` turns those (and NaN/Inf) into None.
"""

from __future__ import annotations

import math

__all__ = ["DCGM_FP64_BLANK", "DCGM_INT32_BLANK", "DCGM_INT64_BLANK", "clean", "decode_throttle"]

DCGM_INT64_BLANK = 0x7FFFFFFFFFFFFFF0
"""``DCGM_INT64_BLANK``; ``+1`` not found, ``+2`` not supported (9223372036854775794 in the
README sample), ``+3`` no permission. Parsed as a float these all round to 2**63."""
DCGM_INT32_BLANK = 0x7FFFFFF0
"""``DCGM_INT32_BLANK`` (2147483632) and the three values after it."""
DCGM_FP64_BLANK = 140737488355328.0
"""``DCGM_FP64_BLANK`` (2**47) and the three values after it."""

_INT64_FLOOR = float(DCGM_INT64_BLANK) - 2.0**12  # floats near 2**63 are 2048 apart


def clean(v: float | None) -> float | None:
    """``v`` as a real value, or None for NaN, +/-Inf and every DCGM blank sentinel."""
    if v is None or math.isnan(v) or math.isinf(v):
        return None
    if v >= _INT64_FLOOR:
        return None
    if DCGM_INT32_BLANK <= v <= DCGM_INT32_BLANK + 15:
        return None
    if DCGM_FP64_BLANK <= v <= DCGM_FP64_BLANK + 15:
        return None
    return v


def decode_throttle(mask: float | None) -> list[str] | None:
    """Words for a clock-event/throttle bitmask (NVML bit values); None when unknown."""
    if mask is None:
        return None
    try:
        from llmtop.gpu.reasons import decode_clock_events
    except ImportError:  # pragma: no cover - the GPU package is built in parallel
        return None
    return decode_clock_events(int(mask))
