"""View state the keys change (sort, filter, pause, interval): plain data, easy to assert."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INTERVALS", "REPLAY_SPEEDS", "ViewState", "next_interval"]

INTERVALS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Refresh intervals ``+``/``-`` step through (seconds)."""

REPLAY_SPEEDS = (1.0, 10.0, 60.0)


@dataclass(slots=True)
class ViewState:
    interval_s: float = 1.0
    paused: bool = False
    sort_column: str = "name"
    sort_reverse: bool = False
    filter_text: str = ""
    show_ranks: bool = False


def next_interval(current: float, direction: int) -> float:
    """The next step up (``+1``) or down (``-1``) from ``current``, clamped to the table."""
    if direction > 0:
        return next((v for v in INTERVALS if v > current + 1e-9), INTERVALS[-1])
    return next((v for v in reversed(INTERVALS) if v < current - 1e-9), INTERVALS[0])
