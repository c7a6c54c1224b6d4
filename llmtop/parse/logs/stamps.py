"""Log line stamps -> epoch seconds: ISO/RFC 3339 stamps, and stamps without a year.

- ``iso(text)``: ``2026-12-07T04:47:19.123456789Z``, ``2026-12-07 04:47:19,123``,
  ``+02:00`` offsets; without an offset the time is local (the log writer's clock is this
  host's, as for every engine llmtop follows locally).
- ``no_year(month, day, h, m, s, frac, ref)``: vLLM's ``12-07 04:47:19`` and glog's
  ``I1207 04:47:19.123456`` carry no year: the year is the one that puts the stamp nearest
  ``ref`` (the envelope's time, else the read time), so a line written on 31 December and
  read on 1 January keeps its year.
"""

from __future__ import annotations

import calendar
import re
import time

__all__ = ["ISO", "iso", "local", "no_year", "plausible"]

ISO = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?\s?(Z|z|[+-]\d\d:?\d\d)?"
)
"""An ISO 8601 / RFC 3339 stamp (``T`` or a space; ``.`` or ``,`` before the fraction)."""

_local_cache: dict[tuple[int, int, int, int, int, int], float] = {}
_no_year_cache: dict[tuple[int, ...], float | None] = {}
_YEAR_9999 = 253402300800.0
"""Epoch seconds of 10000-01-01: a reference time past it (or negative, or NaN) is no time."""


def local(y: int, mo: int, d: int, h: int, mi: int, s: int) -> float | None:
    """Epoch seconds of a local wall-clock time; None when it is no date."""
    key = (y, mo, d, h, mi, s)
    hit = _local_cache.get(key)
    if hit is not None:
        return hit
    if not _valid(y, mo, d, h, mi, s):
        return None
    try:
        value = time.mktime((y, mo, d, h, mi, s, 0, 0, -1))
    except (OverflowError, ValueError):
        return None
    if len(_local_cache) > 4096:
        _local_cache.clear()
    _local_cache[key] = value
    return value


def plausible(t: float) -> bool:
    """True for epoch seconds between 1970 and 9999 (not NaN, not infinite)."""
    return 0.0 <= t < _YEAR_9999


def _valid(y: int, mo: int, d: int, h: int, mi: int, s: int) -> bool:
    return (1970 <= y <= 9999 and 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]
            and h < 24 and mi < 60 and s < 61)


def _fraction(digits: str | None) -> float:
    return int(digits) / 10 ** len(digits) if digits else 0.0


def iso(text: str, start: int = 0) -> float | None:
    """Epoch seconds of the ISO stamp at ``text[start:]``; None when there is none."""
    m = ISO.match(text, start)
    if m is None:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    frac = _fraction(m.group(7))
    zone = m.group(8)
    if zone is None:
        base = local(y, mo, d, h, mi, s)
        return None if base is None else base + frac
    if not _valid(y, mo, d, h, mi, s):
        return None
    base = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        base -= sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
    return base + frac


def no_year(mo: int, d: int, h: int, mi: int, s: int, frac: float, ref: float) -> float | None:
    """Epoch seconds of a stamp with no year: the year that puts it nearest ``ref``."""
    if not 0.0 <= ref < _YEAR_9999:
        return None
    key = (mo, d, h, mi, s, int(ref) // 3600)
    best = _no_year_cache.get(key, 0.0)
    if best == 0.0:
        year = time.localtime(ref).tm_year
        best = None
        for y in (year, year - 1, year + 1):
            t = local(y, mo, d, h, mi, s)
            if t is not None and (best is None or abs(t - ref) < abs(best - ref)):
                best = t
        if len(_no_year_cache) > 4096:
            _no_year_cache.clear()
        _no_year_cache[key] = best
    return None if best is None else best + frac
