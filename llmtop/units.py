"""Numbers with their units, as every face writes them: seconds, percent, counts, rates, bytes.

- ``None`` (not reported) is always ``DASH``, never zero.
- Two styles where the faces mean two things: a table cell is compact (``420ms``, ``62%``),
  a sentence spaces its unit (``420 ms``, ``62 %``). The ``*_words`` functions are the
  sentence style (findings' evidence, ``--once`` notes, the bake-off and tune summaries).
- Below every face (console, diagnosis, UI, loadgen, tune): imports nothing of llmtop.
"""

from __future__ import annotations

__all__ = ["DASH", "age", "byte_rate", "count", "fixed", "flop_rate", "ms_words", "pct",
           "pct_change",
           "pct_words", "rate", "rate_fine", "secs", "secs_fine", "secs_words", "size", "span",
           "tokens_words", "window"]

DASH = "\u2013"
"""En dash: shown for a value that was not reported (None)."""


# -- seconds ---------------------------------------------------------------------------------
def secs(v: float | None) -> str:
    """Seconds in a cell: ``35µs``, ``420ms``, ``1.8s``, ``120s``."""
    if v is None:
        return DASH
    if v < 1e-3:
        return f"{v * 1e6:.0f}µs"
    if v < 1:
        return f"{v * 1e3:.0f}ms"
    if v < 100:
        return f"{v:.1f}s"
    return f"{v:.0f}s"


def secs_words(v: float | None) -> str:
    """Seconds in a sentence: ``85 ms``, ``3.2 s``."""
    if v is None:
        return DASH
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.1f} s"


def secs_fine(v: float | None) -> str:
    """Seconds with more digits (the ``--once`` table): ``8.5 ms``, ``85 ms``, ``1.23 s``."""
    if v is None:
        return DASH
    if v < 1.0:
        return f"{v * 1000:.0f} ms" if v >= 0.01 else f"{v * 1000:.1f} ms"
    return f"{v:.2f} s"


def ms_words(v: float | None) -> str:
    """Seconds as whole milliseconds in a sentence, however long: ``1250 ms``."""
    return DASH if v is None else f"{1000 * v:.0f} ms"


def window(seconds: float) -> str:
    """A window of time in a cell: ``30s``, ``90s``, ``1m``, ``5m`` (minutes when whole)."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:.0f}m"
    return f"{seconds:g}s"


def age(v: float) -> str:
    """An age in at most 4 cells: ``12s``, ``999s``, ``17m``, ``5h``, ``3d``."""
    for unit, div in (("s", 1), ("m", 60), ("h", 3600)):
        n = round(v / div)
        if n < 1000:
            return f"{n}{unit}"
    return f"{round(v / 86400)}d"


def span(seconds: float) -> str:
    """A span of history in at most 4 cells: ``40s`` (under 100 s), ``5m``, ``2h``."""
    if seconds < 99.5:
        return f"{max(0, round(seconds))}s"
    if seconds < 99.5 * 60:
        return f"{round(seconds / 60)}m"
    return f"{round(seconds / 3600)}h"


# -- percent (of a 0..1 fraction) ------------------------------------------------------------
def pct(v: float | None) -> str:
    """A fraction in a cell: ``62%``."""
    return DASH if v is None else f"{v * 100:.0f}%"


def pct_words(v: float | None) -> str:
    """A fraction in a sentence: ``62 %``."""
    return DASH if v is None else f"{v * 100:.0f} %"


def pct_change(v: float | None) -> str:
    """A relative change, signed: ``+12%``, ``-3%``."""
    return DASH if v is None else f"{v:+.0%}"


# -- counts and rates ------------------------------------------------------------------------
def fixed(v: float | None, digits: int = 0) -> str:
    """A number with ``digits`` decimals and no unit (a column or a sentence names it):
    ``4``, ``2.5``, ``0.42``."""
    return DASH if v is None else f"{v:.{digits}f}"


def count(v: float | None, digits: int = 0) -> str:
    """A count in a cell: ``812``, ``1.2k``, ``61k``, ``1.5M`` (``digits`` below 1000)."""
    if v is None:
        return DASH
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.1f}M"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if a >= 1e3 and digits == 0:
        return f"{v / 1e3:.1f}k"
    return f"{v:.{digits}f}"


def rate(v: float | None) -> str:
    """A per-second rate in a cell (no unit): ``0``, ``2.5``, ``42``, ``1.2k``."""
    if v is None:
        return DASH
    if v == 0:
        return "0"
    if abs(v) < 10:
        return f"{v:.1f}"
    return count(v)


def rate_fine(v: float | None) -> str:
    """A per-second rate with more digits (the ``--once`` table): ``2.50``, ``42.0``, ``420``."""
    if v is None:
        return DASH
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def tokens_words(v: float | None) -> str:
    """Tokens in a sentence: ``812 tokens``."""
    return DASH if v is None else f"{v:.0f} tokens"


# -- bytes -----------------------------------------------------------------------------------
def size(v: float | None) -> str:
    """Bytes in a cell, in powers of 1024: ``512B``, ``1.5K``, ``12G``, ``140G``."""
    if v is None:
        return DASH
    for unit, div in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if abs(v) >= div:
            return f"{v / div:.1f}{unit}" if v / div < 100 else f"{v / div:.0f}{unit}"
    return f"{v:.0f}B"


def byte_rate(v: float | None) -> str:
    """Bytes a second, in powers of 1000 (as links are rated): ``512B/s``, ``1.25GB/s``."""
    if v is None:
        return DASH
    for unit, div in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}B/s"
    return f"{v:.0f}B/s"


def flop_rate(v: float | None, sep: str = "") -> str:
    """Floating-point operations a second: ``420MFLOP/s``, ``2.6GFLOP/s``, ``989TFLOP/s``
    (``sep=" "``: ``2.6 GFLOP/s``, in a sentence)."""
    if v is None:
        return DASH
    for unit, div in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:.3g}{sep}{unit}FLOP/s"
    return f"{v:.0f}{sep}FLOP/s"
