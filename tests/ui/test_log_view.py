"""The log view (``L``) with ``run_test`` at 80x24: what is shown, following and pausing,
search, the errors-only filter, jumping to a time, bad text, back. Hand-made snapshots with
events (``ui.fake_logs`` and ``LogEvent`` values built here)."""

from __future__ import annotations

from dataclasses import replace

from rich.cells import cell_len

from llmtop.model.logs import LogEvent, LogLocation, LogSummary
from llmtop.ui.fake import FROZEN_TIME, FakeSource, demo_snapshot
from llmtop.ui.fake_logs import DEAD, with_log_events
from llmtop.ui.screens.logs import NO_LOG_HINT, LogScreen
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.logview import MAX_WRAP, WRAP_MARK, LogLines

from .conftest import first_paint, make_app

T = FROZEN_TIME
VLLM = "vllm@127.0.0.1:8000"


def _info(t: float, text: str) -> LogEvent:
    return LogEvent(t_wall=t, severity="info", lines=(text,), headline=text)


def _snap(events: list[LogEvent], t: float = T, log: LogSummary | None = None):
    """The ``ok`` engines at ``t``, the vLLM's log followed with ``events``."""
    snap = demo_snapshot(t=t)
    log = log or LogSummary(location=LogLocation(kind="file", label="/var/log/vllm.log"))
    rows = [replace(r, log=log) if r.target == VLLM else r for r in snap.engines]
    return with_log_events(replace(snap, engines=rows), {VLLM: events})


class Store:
    """What the view needs of a store: ``seen``; records what it was told."""

    def __init__(self) -> None:
        self.seen_calls: list[tuple[str, float]] = []

    def seen(self, target: str, t: float) -> None:
        self.seen_calls.append((target, t))


def _growing(n_start: int = 30, per_tick: int = 5) -> FakeSource:
    """A source whose vLLM log gains ``per_tick`` lines each tick (one a second)."""
    def at(n: int):
        count = n_start + per_tick * n
        evs = [_info(T - 200 + i, f"line {i}") for i in range(count)]
        return _snap(evs, t=T - 200 + count)
    return FakeSource(at(0), snapshots=at)


async def _open_log(app, pilot) -> LogScreen:
    await first_paint(app, pilot)
    await pilot.press("down", "down", "L")  # rows by name: sglang, triton, vllm
    await pilot.pause()
    assert isinstance(app.screen, LogScreen), app.screen
    return app.screen


def _lines(app) -> LogLines:
    return app.screen.query_one(LogLines)


async def _tick(app, pilot) -> None:
    await app.poll_once()
    await pilot.pause()
    app.paint()
    await pilot.pause()


def _text(app) -> str:
    return "\n".join(screen_lines(app))


async def test_a_traceback_is_shown_whole_with_its_headline_and_every_row_fits_80x24():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open_log(app, pilot)
        text = _text(app)
        assert "Log · vllm :8000" in text and "/var/log/vllm/server.log" in text
        assert "FOLLOWING" in text
        for line in ("11:06:00 ERR AsyncLLM output_handler failed.",
                     "Traceback (most recent call last):", "vllm.v1.engine.exceptions."
                     "EngineDeadError: EngineCore encountered"):
            assert line in text, line
        lines = _lines(app)
        rows = [lines.row_text(r) for r in range(len(lines.rows))]
        assert all(cell_len(r.plain) <= lines.size.width for r in rows)
        # the headline wraps under the text column, marked, nothing lost, bold
        head = next(r for r in rows if "EngineDeadError" in r.plain)
        at = rows.index(head)
        assert rows[at + 1].plain.lstrip().startswith(WRAP_MARK)
        joined = head.plain[13:] + rows[at + 1].plain[13:]
        assert joined.rstrip() == DEAD
        assert any("bold" in str(span.style) for span in head.spans)
        first = rows[at - 4]  # "AsyncLLM output_handler failed." is not the headline
        assert not any("bold" in str(span.style) for span in first.spans[1:])
        assert "esc Back" in screen_lines(app)[-1] and "/ Search" in screen_lines(app)[-1]
        assert scr.target == VLLM


async def test_following_shows_new_events_and_scrolling_up_pauses_until_G():
    app = make_app(source=_growing())
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        lines = _lines(app)
        assert lines.following and lines.visible_text()[-1].endswith("line 29")
        await _tick(app, pilot)
        assert lines.visible_text()[-1].endswith("line 34")  # new events in view
        await pilot.press("up", "up")
        await pilot.pause()
        assert not lines.following and "PAUSED at" in _text(app)
        top = lines.visible_text()[0]
        await _tick(app, pilot)
        assert lines.visible_text()[0] == top  # paused: the view stays on its events
        assert not lines.visible_text()[-1].endswith("line 39")
        await pilot.press("G")
        await pilot.pause()
        assert lines.following and lines.visible_text()[-1].endswith("line 39")
        assert "FOLLOWING" in _text(app)
        await pilot.press("pageup", "end")
        await pilot.pause()
        assert lines.following


async def test_a_paused_view_keeps_its_event_as_older_ones_drop_out():
    def at(n: int):  # a bounded log: the oldest 5 leave as 5 arrive
        evs = [_info(T - 200 + i, f"line {i}") for i in range(5 * n, 60 + 5 * n)]
        return _snap(evs, t=T - 200 + 60 + 5 * n)
    app = make_app(source=FakeSource(at(0), snapshots=at))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        lines = _lines(app)
        await pilot.press("pageup")
        await pilot.pause()
        top = lines.visible_text()[0]
        await _tick(app, pilot)
        assert lines.visible_text()[0] == top


async def test_search_highlights_and_n_N_move_between_matches():
    evs = [_info(T - 100 + i, f"line {i}" + (" oom here" if i % 20 == 5 else ""))
           for i in range(80)]
    app = make_app(source=FakeSource(_snap(evs)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        lines = _lines(app)
        await pilot.press("slash", "O", "O", "M", "enter")
        await pilot.pause()
        assert [m[0] for m in lines.matches] == [5, 25, 45, 65]
        assert lines.current == 3 and "/OOM 4 of 4" in _text(app)  # the newest first
        assert any("line 65 oom here" in r for r in lines.visible_text())
        row = next(r for r in range(len(lines.rows)) if lines.rows[r][0] == 65)
        hl = [s for s in lines.row_text(row).spans if "reverse" in str(s.style)]
        assert [(s.start, s.end) for s in hl] == [(13 + 8, 13 + 11)]  # "oom", any case
        await pilot.press("N", "N")
        await pilot.pause()
        assert lines.current == 1 and any("line 25 oom" in r for r in lines.visible_text())
        assert not lines.following and "/OOM 2 of 4" in _text(app)
        await pilot.press("n", "n", "n")
        await pilot.pause()
        assert lines.current == 0  # wrapped round
        await pilot.press("slash", "backspace", "backspace", "backspace", "z", "z", "enter")
        await pilot.pause()
        assert lines.matches == [] and "/zz no match" in _text(app)


async def test_e_shows_warnings_and_worse_then_errors_only():
    evs = [_info(T - 50, "fine"),
           LogEvent(T - 40, "warning", ("slow",), "slow"),
           LogEvent(T - 30, "error", ("Traceback (most recent call last):", "X: bad"),
                    "X: bad"),
           LogEvent(T - 20, "critical", ("dead",), "dead"),
           _info(T - 10, "fine again")]
    app = make_app(source=FakeSource(_snap(evs)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        lines = _lines(app)
        assert len(lines.events) == 5 and "· all ·" in _text(app)
        await pilot.press("e")
        await pilot.pause()
        assert [e.headline for e in lines.events] == ["slow", "X: bad", "dead"]
        assert "warnings+" in _text(app)
        await pilot.press("e")
        await pilot.pause()
        assert [e.headline for e in lines.events] == ["X: bad", "dead"]
        assert "errors only" in _text(app) and "Traceback" in _text(app)
        await pilot.press("e")
        await pilot.pause()
        assert len(lines.events) == 5


async def test_errors_only_on_a_quiet_log_says_so():
    app = make_app(source=FakeSource(_snap([_info(T - 5, "all good")])))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        await pilot.press("e", "e")
        await pilot.pause()
        assert "no event at error or worse among the kept ones (e: all)" in _text(app)


async def test_t_jumps_to_a_clock_time_or_an_offset():
    evs = [_info(T - 600 + 10 * i, f"line {i}") for i in range(60)]  # 10:56:40 .. 11:06:30
    app = make_app(source=FakeSource(_snap(evs)))
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await _open_log(app, pilot)
        lines = _lines(app)
        await pilot.press("t", *"11:00:05", "enter")
        await pilot.pause()
        assert lines.visible_text()[0].startswith("11:00:10 INF line 21")
        assert not lines.following and "PAUSED at 11:00:10" in _text(app)
        assert scr.jump_to("-5m") is None  # 11:01:40
        assert lines.visible_text()[0].startswith("11:01:40 INF line 30")
        err = scr.jump_to("yesterday-ish")
        assert err is not None and "cannot read 'yesterday-ish'" in err
        assert lines.visible_text()[0].startswith("11:01:40")  # unchanged


async def test_esc_closes_the_search_box_first_then_goes_back_and_q_goes_back():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        await pilot.press("slash", "q")  # typed into the box, not quitting
        await pilot.pause()
        assert isinstance(app.screen, LogScreen) and _lines(app).needle == "q"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("L")
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen) and app.is_running


async def test_a_log_that_cannot_be_read_says_why():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("L")  # sglang: its log is a terminal
        await pilot.pause()
        text = _text(app)
        assert "cannot read: /proc/4101/fd/1 is a terminal" in text
        assert "cannot read this log: /proc/4101/fd/1 is a terminal" in text


async def test_an_engine_without_a_log_summary_gets_the_hint():
    app = make_app("logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        app.push_screen(LogScreen(app, "tgi@127.0.0.1:9999"))
        await pilot.pause()
        assert "no log followed" in _text(app)
        assert _lines(app).empty_text.plain == NO_LOG_HINT
        assert "--log TARGET=PATH" in _text(app)  # wrapped, whole


async def test_binary_and_huge_lines_are_shown_safely():
    junk = "".join(chr(c) for c in range(0, 32)) + "\udcff\x7f" + "é" * 20
    evs = [_info(T - 3, junk), _info(T - 2, "z" * 8192), _info(T - 1, "after")]
    app = make_app(source=FakeSource(_snap(evs)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        lines = _lines(app)
        huge = [r for r in lines.rows if r[0] == 1]
        assert len(huge) == MAX_WRAP and huge[-1][4]
        assert lines.row_text(lines.starts[1] + MAX_WRAP - 1).plain.endswith("z\u2026")
        for r in range(len(lines.rows)):
            plain = lines.row_text(r).plain
            assert plain.isprintable() and cell_len(plain) <= 80
        assert "after" in _text(app)


async def test_opening_the_log_tells_the_store_it_was_read():
    src = FakeSource.demo("logs")
    src.store = Store()
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        newest = max(ev.t_wall for ev in src._snap.log_events[VLLM])
        assert src.store.seen_calls and src.store.seen_calls[-1][0] == VLLM
        assert src.store.seen_calls[-1][1] >= newest


async def test_the_kept_events_may_be_a_deque():
    from collections import deque

    src = FakeSource(_snap(deque(_info(T - 60 + i, f"line {i}") for i in range(60))))
    src.store = Store()
    app = make_app(source=src)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        assert _lines(app).visible_text()[-1].endswith("line 59")
        assert src.store.seen_calls[-1][1] >= T - 1


async def test_a_view_opened_at_a_moment_starts_there_paused():
    """``at``: a time picked elsewhere (no history screen picks one yet)."""
    evs = [_info(T - 600 + 10 * i, f"line {i}") for i in range(60)]
    app = make_app(source=FakeSource(_snap(evs)))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        app.push_screen(LogScreen(app, VLLM, at=T - 300))  # 11:01:40
        await pilot.pause()
        lines = _lines(app)
        assert lines.visible_text()[0].startswith("11:01:40 INF line 30")
        assert not lines.following and "PAUSED at 11:01:40" in _text(app)


async def test_the_store_is_told_only_of_a_newer_time():
    app = make_app(source=_growing())
    app.source.store = Store()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_log(app, pilot)
        for _ in range(3):
            app.paint()  # repaints with nothing new
            await pilot.pause()
        assert len(app.source.store.seen_calls) == 1
        await _tick(app, pilot)
        assert len(app.source.store.seen_calls) == 2
        assert app.source.store.seen_calls[1][1] > app.source.store.seen_calls[0][1]
