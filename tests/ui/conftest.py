"""UI test helpers: deterministic environment, FakeSource apps, a fake replay control."""

from __future__ import annotations

import os
import time

import pytest

os.environ["TEXTUAL_ANIMATIONS"] = "none"
os.environ["TZ"] = "UTC"
os.environ.pop("NO_COLOR", None)
time.tzset()

from llmtop.config import Config  # noqa: E402
from llmtop.ui.app import LlmtopApp  # noqa: E402
from llmtop.ui.fake import FROZEN_TIME, FakeSource  # noqa: E402


class FakeReplay:
    """A ReplayControl that records what it was asked."""

    is_replay = True

    def __init__(self) -> None:
        self.position_wall: float | None = FROZEN_TIME
        self.playing = True
        self.speed = 1.0
        self.calls: list[tuple] = []

    def toggle_play(self) -> None:
        self.playing = not self.playing
        self.calls.append(("toggle_play",))

    def set_speed(self, x: float) -> None:
        self.speed = x
        self.calls.append(("set_speed", x))

    def step(self, n: int) -> None:
        self.calls.append(("step", n))

    def jump(self, seconds: float) -> None:
        self.calls.append(("jump", seconds))

    def seek(self, text: str) -> str | None:
        self.calls.append(("seek", text))
        return None if ":" in text else f"cannot parse {text!r}"


def make_app(scenario: str = "ok", *, source=None, theme: str | None = None,
             config: Config | None = None, **kw) -> LlmtopApp:
    src = source or FakeSource.demo(scenario, **kw)
    return LlmtopApp(src, config or Config(), autopoll=False, theme=theme,
                     clock=lambda: FROZEN_TIME)


async def first_paint(app: LlmtopApp, pilot) -> None:
    await app.poll_once()
    await pilot.pause()
    app.paint()
    await pilot.pause()


@pytest.fixture(autouse=True)
def _no_user_themes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
