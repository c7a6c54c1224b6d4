"""Where a search stands, for the live view (``console.tune_live``): the trial(s) running and
the level each is measuring, how many of the configurations are done or skipped, the best so
far and the time left in the budget. Plain state, updated by the search; never renders."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["TuneProgress"]


@dataclass
class TuneProgress:
    """The search's progress (times are ``time.monotonic()``)."""

    total: int = 0
    """Configurations in the space."""
    deadline: float | None = None
    """When the budget runs out (None: no budget)."""
    started: int = 0
    """Trials started so far (the k of "trial k of n")."""
    done: int = 0
    """Trials finished (measured or failed)."""
    skipped: int = 0
    running: dict[str, str | None] = field(default_factory=dict)
    """Each running trial (its parameters in words) -> the level being measured."""
    best: str | None = None
    """The best configuration so far, in words with its score."""
    last: str | None = None
    """The last level's result, one line."""

    def budget_left(self, now: float | None = None) -> float | None:
        """Seconds left in the budget (never below 0); None without a budget."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - (time.monotonic() if now is None else now))
