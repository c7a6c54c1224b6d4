"""Replay keys (issue 7): active only when the source offers a ``ReplayControl``."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding

from llmtop.ui.state import REPLAY_SPEEDS

__all__ = ["REPLAY_ACTIONS", "REPLAY_BINDINGS", "ReplayActions"]

REPLAY_ACTIONS = {"replay_speed", "replay_step", "replay_jump", "replay_seek"}
"""Actions hidden (and refused) on a live source."""

REPLAY_BINDINGS = [
    Binding("x", "replay_speed", "Speed", tooltip="replay speed x1/x10/x60", id="speed"),
    Binding("comma", "replay_step(-1)", "Step back", key_display=",", show=False,
            id="step_back"),
    Binding("full_stop", "replay_step(1)", "Step fwd", key_display=".", show=False,
            id="step_fwd"),
    Binding("left_square_bracket", "replay_jump(-60)", "-1 min", key_display="[",
            show=False, id="back_1m"),
    Binding("right_square_bracket", "replay_jump(60)", "+1 min", key_display="]",
            show=False, id="fwd_1m"),
    Binding("left_curly_bracket", "replay_jump(-600)", "-10 min", key_display="{",
            show=False, id="back_10m"),
    Binding("right_curly_bracket", "replay_jump(600)", "+10 min", key_display="}",
            show=False, id="fwd_10m"),
    Binding("colon", "replay_seek", "Seek", key_display=":", id="seek"),
]


class ReplayActions:
    """Mixin for the app: play/pause lives in ``action_pause``; these are the rest."""

    replay: Any

    def action_replay_speed(self) -> None:
        cur = getattr(self.replay, "speed", 1.0)
        nxt = next((s for s in REPLAY_SPEEDS if s > cur), REPLAY_SPEEDS[0])
        self.replay.set_speed(nxt)
        self.request_paint(force=True)

    def action_replay_step(self, n: int) -> None:
        self.replay.step(n)
        self.action_refresh_now()

    def action_replay_jump(self, seconds: float) -> None:
        self.replay.jump(seconds)
        self.action_refresh_now()

    def action_replay_seek(self) -> None:
        from llmtop.ui.screens.help import SeekScreen

        self.push_screen(SeekScreen(), self._seek)

    def _seek(self, text: str | None) -> None:
        if text:
            err = self.replay.seek(text)
            if err:
                self.notify(err, severity="error")
            self.action_refresh_now()

