"""A recording with a router replays in the TUI with the same groups as live: the router's
row heads its backends, in the same order, with the same shares and the same fold."""

from __future__ import annotations

import asyncio

from llmtop.config import Config
from llmtop.record.reader import Recording
from llmtop.record.replay import ReplaySource
from llmtop.ui.app import LlmtopApp
from llmtop.ui.fake import FROZEN_TIME, FakeSource
from llmtop.ui.source import MonitorSource
from llmtop.ui.textshot import screen_lines
from tests.stack.test_replay_stack import CONFIG, Monitor, Recorder, RecordingMonitor, StackScraper

from .conftest import first_paint
from .test_stack_tui import _rows


async def _record(path, ticks: int):
    mon = RecordingMonitor(Monitor(CONFIG, scraper=StackScraper()), Recorder(path, CONFIG))
    for _ in range(ticks):
        await mon.tick()
    snap = mon.store.snapshot(3.0)
    await mon.aclose()
    return snap


async def _table(source, keys=()) -> list[list[str]]:
    app = LlmtopApp(source, Config(interval_s=1.0), autopoll=False,
                    clock=lambda: FROZEN_TIME)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        shots = [_rows(screen_lines(app))]
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
            app.paint()
            await pilot.pause()
            shots.append(_rows(screen_lines(app)))
        return shots


def test_replay_shows_the_same_router_groups_as_live(tmp_path):
    path = tmp_path / "stack.llrec"
    live_snap = asyncio.run(_record(path, 12))
    live = asyncio.run(_table(FakeSource(live_snap), ("c",)))
    rec = Recording.open(path)
    src = ReplaySource(rec, clock=lambda: 0.0)
    src.jump(3600)  # the end of the recording
    again = asyncio.run(_table(MonitorSource(src, host="replay"), ("c",)))

    def names(rows):  # the name column (STATE: the replay has its findings, the copy none)
        return [" ".join(r.split()[:6]) for r in rows if r.strip()]

    opened, folded = names(live[0]), names(live[1])
    assert opened[0].startswith("▾ router round_robin RETRY")
    assert opened[1].startswith(":8001 req 50% cap 50%")
    assert opened[2].startswith(":8002 req 50% cap 50%")
    assert len(folded) == 1 and folded[0].startswith("▸ router round_robin")
    assert [n[:22] for n in names(again[0])] == [n[:22] for n in opened]
    assert [n[:22] for n in names(again[1])] == [n[:22] for n in folded]
