"""``LiveView``: what a screen reads from the running app, as an interface.

Screens receive a ``LiveView`` when they are made (the app passes itself) and never import
``llmtop.ui.app``: the app imports the screens, not the other way round. What a screen asks
the app to do goes through Textual's own App API (``push_screen``, ``pop_screen``) or the
view's data (``state`` is the shared view state the keys change).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from llmtop.config import Config, Thresholds
    from llmtop.diagnose.findings import Finding
    from llmtop.model import Snapshot
    from llmtop.ui.source import ReplayControl, Source
    from llmtop.ui.state import ViewState
    from llmtop.verdict import Verdict

__all__ = ["LiveView"]


class LiveView(Protocol):
    """The latest data and view state (``LlmtopApp`` implements it)."""

    snapshot: Snapshot | None
    source: Source
    state: ViewState
    config: Config
    thresholds: Thresholds
    verdict: Verdict
    diagnosis: list[Finding]
    """The current findings (``diagnose``), worst first."""
    replay: ReplayControl | None
    """Playback controls when the source is a replay, else None."""
    clock: Callable[[], float]

    def replay_badge(self) -> str | None:
        """``REPLAY ▶ x1 HH:MM:SS`` in replay, else None."""
        ...

    def trend(self, key: str, field: str) -> str:
        """A trend arrow for a row's series."""
        ...
