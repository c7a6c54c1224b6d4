"""Replay keys: active only when the source offers a ``ReplayControl``."""

from __future__ import annotations

from typing import Any

from llmtop.ui.replay_bindings import REPLAY_ACTIONS, REPLAY_BINDINGS
from llmtop.ui.state import REPLAY_SPEEDS

__all__ = ["REPLAY_ACTIONS", "REPLAY_BINDINGS", "ReplayActions"]


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

