"""NVML answers as plain values: constants with fallbacks, text, numbers.

- ``c(nvml, name, fallback)``: a pynvml constant, or ``fallback`` where the binding lacks it.
- ``text(v)``: bytes or str without NULs and blanks; None when empty.
- ``num(v, scale)`` / ``integer(v)``: a number, None for None, bools and garbage.
"""

from __future__ import annotations

from typing import Any

__all__ = ["c", "integer", "num", "text"]


def c(nvml: Any, name: str, fallback: int) -> int:
    """A pynvml constant, or ``fallback`` where the binding lacks it."""
    v = getattr(nvml, name, fallback)
    return v if isinstance(v, int) else fallback


def text(v: Any) -> str | None:
    """Bytes or str without NULs and blanks; None when empty."""
    if v is None:
        return None
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    v = str(v).strip("\0 ").strip()
    return v or None


def num(v: Any, scale: float = 1.0) -> float | None:
    """``v * scale`` as a float; None for None, bools and garbage."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v) * scale
    except (TypeError, ValueError):
        return None


def integer(v: Any) -> int | None:
    """``v`` as an int; None for None, bools and garbage."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
