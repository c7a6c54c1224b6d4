"""The clock llmtop and its demo engines read, sped up for tests by ``LLMTOP_TIME_SCALE``.

Unset (or 1): the real clock. ``LLMTOP_TIME_SCALE=K@E`` (K > 0, E a Unix time): ``time()``
runs K times as fast as the wall clock from E on, ``monotonic()`` K times as fast, and
``sleep(s)`` waits ``s / K`` real seconds. Every process given the same value agrees on the
time, so a demo engine (a child) and the monitor reading it see the same seconds: a 30 s
diagnosis window over a demo scenario passes in 30 / K real seconds. ``K`` alone: E is the
first read in this process. Tests only (``env_value``); a user never needs it.
"""

from __future__ import annotations

import asyncio
import os
import time as _time

__all__ = ["ENV", "env_value", "monotonic", "scale", "sleep", "time"]

ENV = "LLMTOP_TIME_SCALE"
_parsed: tuple[str, float, float] = ("", 1.0, 0.0)
"""(the variable's text, K, E) as last read."""


def _read() -> tuple[float, float]:
    global _parsed
    raw = os.environ.get(ENV, "")
    if raw != _parsed[0]:
        k, _, e = raw.partition("@")
        try:
            k_f = float(k) if k.strip() else 1.0
            e_f = float(e) if e.strip() else _time.time()
        except ValueError:
            k_f, e_f = 1.0, 0.0
        _parsed = (raw, k_f if k_f > 0 else 1.0, e_f)
    return _parsed[1], _parsed[2]


def scale() -> float:
    """K: how many clock seconds pass per real second (1: the real clock)."""
    return _read()[0]


def time() -> float:
    """Unix time, K times as fast from E on."""
    k, e = _read()
    now = _time.time()
    return now if k == 1.0 else e + (now - e) * k


def monotonic() -> float:
    """A monotonic clock, K times as fast."""
    return _time.monotonic() * _read()[0]


async def sleep(seconds: float) -> None:
    """Sleep ``seconds`` of this clock (``seconds / K`` real seconds)."""
    await asyncio.sleep(max(0.0, seconds) / _read()[0])


def env_value(k: float, epoch: float | None = None) -> str:
    """The ``LLMTOP_TIME_SCALE`` value for K, from ``epoch`` (default: now)."""
    return f"{float(k)!r}@{_time.time() if epoch is None else epoch!r}"
