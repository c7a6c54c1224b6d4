"""The replay keys as data (bindings and their actions), apart from the app mixin that acts
on them (``replay_keys``), so help can list them without importing what opens its screens."""

from __future__ import annotations

from textual.binding import Binding

__all__ = ["REPLAY_ACTIONS", "REPLAY_BINDINGS"]

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
