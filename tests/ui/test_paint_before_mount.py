"""A source that answers at once (a replay, a fast demo) must not paint a screen before it
is mounted: that showed ``error paint: NoMatches: No nodes match 'EventLog'`` in the log."""

from __future__ import annotations

from llmtop.config import Config
from llmtop.ui.app import LlmtopApp
from llmtop.ui.fake import FROZEN_TIME, FakeSource
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.widgets.panels import EventLog

from .conftest import FakeReplay


async def test_an_instant_first_tick_paints_no_error():
    src = FakeSource.demo(replay=FakeReplay(), events=[])
    app = LlmtopApp(src, Config(), autopoll=True, clock=lambda: FROZEN_TIME)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(5):
            await pilot.pause(0.1)
        errors = [e.text for e in src.events() if e.level == "error"]
        assert errors == []
        assert isinstance(app.screen, OverviewScreen)
        # and the first snapshot did reach the screen once it was mounted
        table = app.screen.query_one("#engines")
        assert table.row_count == 3
        assert app.screen.query_one(EventLog) is not None
