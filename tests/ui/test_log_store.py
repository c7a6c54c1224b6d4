"""The log view on the real store (``history``): a followed log's new error marks the
overview, ``L`` shows the store's kept events, and opening it tells the store (``seen``),
so the next snapshot has no new errors and the mark is gone. Skipped where the store keeps
no log events (before the history helper's branch is merged)."""

from __future__ import annotations

import pytest

from llmtop.config import Config, Target
from llmtop.history.store import Store
from llmtop.model.logs import LogEvent, LogLocation, RawLog
from llmtop.ui.app import LlmtopApp
from llmtop.ui.screens.logs import LogScreen
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.source import MonitorSource
from llmtop.ui.widgets.engines import LOG_MARK, EnginesTable
from llmtop.ui.widgets.logview import LogLines
from tests.history.fakes import body, fake_detect, fake_normalize, raw

from .conftest import first_paint

pytestmark = pytest.mark.skipif(not hasattr(Store, "add_log"),
                                reason="the store keeps log events from the history branch on")

W0 = 1_700_000_000.0


class _Monitor:
    """What ``MonitorSource`` reads: the store; a tick is a snapshot of it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def tick(self):
        return self.store.snapshot(10.0)

    async def aclose(self) -> None:
        return None


def _store() -> Store:
    target = Target(name="a", base_url="http://127.0.0.1:1", host="127.0.0.1")
    store = Store(Config(targets=(target,), interval_s=1.0), normalize=fake_normalize,
                  detect=fake_detect)
    for t in range(6):
        store.ingest(raw("a", float(t), body(counters={"generation_tokens": 10.0 * t})))
        store.commit(float(t), W0 + t)
    dead = LogEvent(W0 + 4.5, "error", ("Traceback (most recent call last):", "X: boom"),
                    "X: boom")
    store.add_log(RawLog(target="a", t_wall=W0 + 5, t_mono=5.0, events=[
        LogEvent(W0 + 4.0, "info", ("started",), "started"), dead],
        location=LogLocation(kind="file", label="/var/log/a.log", path="/var/log/a.log")))
    store.commit(6.0, W0 + 6)
    return store


def _marked(app) -> bool:
    table = app.screen.query_one(EnginesTable)
    return any(table.render_line(y).text.startswith(LOG_MARK)
               for y in range(1, table.size.height))


async def test_the_store_s_new_error_is_marked_shown_and_read():
    store = _store()
    app = LlmtopApp(MonitorSource(_Monitor(store), host="test"), Config(), autopoll=False,
                    clock=lambda: W0 + 6)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert app.snapshot.engines[0].log.new_errors == 1
        assert _marked(app)
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        lines = app.screen.query_one(LogLines)
        assert [ev.headline for ev in lines.events] == ["started", "X: boom"]
        await app.poll_once()
        await pilot.pause()
        assert app.snapshot.engines[0].log.new_errors == 0  # read: no longer new
        await pilot.press("escape")
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and not _marked(app)
