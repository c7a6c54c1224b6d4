"""Where the log shows outside its view: the overview's mark for new errors, the sparklines'
error strip, the engine detail, the requests screen's ``L``, help and the footer; and that
``L`` is neither shown nor run where no log is followed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmtop.model.logs import LogEvent, LogLocation, LogSummary
from llmtop.ui.fake import FROZEN_TIME, FakeSource, demo_snapshot
from llmtop.ui.fake_logs import DEAD, slowest_request_id, with_log_events
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.screens.help import LOG_SECTION, HelpScreen
from llmtop.ui.screens.logs import LogScreen
from llmtop.ui.screens.overview import LOG_STRIP_LABEL, OverviewScreen
from llmtop.ui.screens.requests import RequestsScreen
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.engines import LOG_MARK, EnginesTable
from llmtop.ui.widgets.logview import LogLines
from llmtop.ui.widgets.panels import SparkPanel

from .conftest import first_paint, make_app

T = FROZEN_TIME
VLLM = "vllm@127.0.0.1:8000"


def _text(app) -> str:
    return "\n".join(screen_lines(app))


def _table_lines(app) -> list[str]:
    table = app.screen.query_one(EnginesTable)
    return [table.render_line(y).text for y in range(table.size.height)]


@pytest.mark.parametrize("size", [(80, 24), (64, 20), (160, 48)])
async def test_the_overview_marks_the_engine_whose_log_has_new_errors(size):
    app = make_app("logs")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        rows = {name: line for line in _table_lines(app)[1:]
                for name in ("vllm", "sglang", "triton") if f"{name} :" in line}
        assert rows["vllm"].startswith(LOG_MARK + "vllm :8000")
        assert rows["sglang"].startswith(" sglang") and rows["triton"].startswith(" triton")
        header = _table_lines(app)[0]
        assert all(len(line) == len(header) for line in _table_lines(app))  # nothing moved
        assert "L Log" in screen_lines(app)[-1]


async def test_the_mark_goes_when_the_errors_are_read():
    def at(n: int):
        snap = FakeSource.demo("logs")._snap
        rows = [replace(r, log=replace(r.log, new_errors=0)) if n and r.target == VLLM
                else r for r in snap.engines]
        return replace(snap, engines=rows)
    app = make_app(source=FakeSource(at(0), snapshots=at))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert any(line.startswith(LOG_MARK) for line in _table_lines(app))
        await app.poll_once()
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert not any(line.startswith(LOG_MARK) for line in _table_lines(app))


async def test_without_a_followed_log_L_is_neither_offered_nor_run():
    app = make_app("ok")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert "L Log" not in _text(app)
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        plain = app.screen.plain_text()
        assert "Errors" not in plain and "jump to a time" not in plain


async def test_help_lists_the_log_keys_where_logs_are_followed():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        plain = app.screen.plain_text(width=200)
        assert LOG_SECTION.split(" (")[0] in plain
        for words in ("the selected engine's log", "this engine's log",
                      "the selected request's log lines", "jump to a time: 03:12, -5m",
                      "all, warnings and worse, errors and worse",
                      "to the newest, following again"):
            assert words in plain, words


async def test_the_sparklines_mark_log_errors_at_their_time():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down")  # vllm
        await pilot.pause()
        app.paint()
        await pilot.pause()
        panel = app.screen.query_one(SparkPanel)
        label, values, caption = panel.series[-1]
        assert label == LOG_STRIP_LABEL and caption == "1"
        # the error 40 s before the snapshot, at one point a second: on the point 40 s
        # before the newest (the fake's series end at the snapshot's time)
        assert [i - len(values) for i, v in enumerate(values) if v is not None] == [-41]
        strip = next(line for line in panel.render().plain.split("\n")
                     if LOG_STRIP_LABEL in line)
        drawn = strip.split(LOG_STRIP_LABEL, 1)[1]
        assert sum(ch in "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588" for ch in drawn) == 1
        await pilot.press("up")  # triton: followed, no error: a known 0
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert panel.series[-1][0] == LOG_STRIP_LABEL and panel.series[-1][2] == "0"
        await pilot.press("up")  # sglang: cannot be read: not known
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert panel.series[-1][2] == "\u2013"


async def test_no_log_strip_without_a_followed_log():
    app = make_app("ok")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        panel = app.screen.query_one(SparkPanel)
        assert all(label != LOG_STRIP_LABEL for label, _, _ in panel.series)


async def test_the_detail_of_a_down_engine_shows_its_log_line_and_L_opens_the_log():
    app = make_app("logs_down")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        # the header's one line names the engine's own error, module path cut
        assert ("CRITICAL \u2014 vllm@:8000 DOWN \u2014 log: EngineDeadError"
                in screen_lines(app)[1])
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        text = _text(app)
        assert "DOWN" in text and "Log: /var/log/vllm/server.log" in text
        # the state carries the engine's line (as the store writes it); the Log section
        # points at it instead of saying it twice
        assert "DOWN  log:" in text and "vllm.v1.engine.exceptions.EngineDeadError" in text
        assert "last error 11:06:00  (the line in the state above)" in text
        assert "L Log" in screen_lines(app)[-1]
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen) and app.screen.target == VLLM
        # the lines after the error explain nothing; the error is still in view, whole
        text = _text(app)
        assert "EngineDeadError" in text and "nanobind: leaked" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)


async def test_L_on_a_request_shows_only_the_lines_naming_it():
    src = FakeSource.demo("logs")
    rid = slowest_request_id(src.requests, T)
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, RequestsScreen) and app.screen.shown[0].id == rid
        await pilot.press("L")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen) and app.screen.request_id == rid
        lines = app.screen.query_one(LogLines)
        assert [ev.request_id for ev in lines.events] == [rid]
        assert f"request {rid}" in screen_lines(app)[0]
        assert f"Added request {rid}." in _text(app)


async def test_a_request_the_log_never_names_says_how_to_get_ids():
    src = FakeSource.demo("logs")
    snap = src._snap
    src._snap = with_log_events(snap, {VLLM: [LogEvent(T - 1, "error", (DEAD,), DEAD)]})
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("r", "L")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        assert "no log line names request" in _text(app)
        assert "--enable-log-requests" in _text(app)


async def test_a_replay_of_an_old_recording_without_logs_offers_no_L():
    snap = demo_snapshot()
    rows = [replace(r, log=None) for r in snap.engines]
    app = make_app(source=FakeSource(replace(snap, engines=rows)))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert not app.mode_allows("logs")
        src = FakeSource.demo("logs")
        app.source._snap = src._snap
        await app.poll_once()
        await pilot.pause()
        assert app.mode_allows("logs")


def test_a_summary_with_no_location_is_still_a_followed_log():
    log = LogSummary(location=None)
    snap = demo_snapshot()
    rows = [replace(r, log=log) for r in snap.engines]
    from llmtop.ui.screens.logs import has_logs

    assert has_logs(replace(snap, engines=rows))
    assert not has_logs(snap) and not has_logs(None)
    assert LogLocation(kind=None, label="x", error="why").error == "why"


async def test_L_is_offered_as_soon_as_a_log_is_followed():
    logs = FakeSource.demo("logs")._snap
    src = FakeSource(demo_snapshot(), snapshots=lambda n: demo_snapshot() if n == 0 else logs)
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert "L Log" not in screen_lines(app)[-1]
        await app.poll_once()  # the follower found the logs
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert "L Log" in screen_lines(app)[-1]
