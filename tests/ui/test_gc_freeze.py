"""Start-up objects are taken out of the cyclic GC's full collections once polling runs."""

from __future__ import annotations

import asyncio
import gc

from llmtop.config import Config
from llmtop.ui.app import FREEZE_AFTER_TICKS, GC_THRESHOLDS, LlmtopApp
from llmtop.ui.fake import FakeSource


async def test_startup_objects_are_frozen_after_the_first_polls():
    gc.unfreeze()
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # Python's default (an app run earlier may have changed it)
    src = FakeSource.demo("ok")
    app = LlmtopApp(src, Config(interval_s=0.05))
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            for _ in range(200):
                if gc.get_freeze_count():
                    break
                await asyncio.sleep(0.02)
            frozen = gc.get_freeze_count()
            assert src.ticks >= FREEZE_AFTER_TICKS
            # the app and its screen are among the objects a full collection no longer walks
            assert frozen > 1000
            assert not any(o is app for o in gc.get_objects())
            # and young collections are rarer from then on
            assert gc.get_threshold() == GC_THRESHOLDS
            assert GC_THRESHOLDS[0] > 700
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
