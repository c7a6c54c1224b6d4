"""Pilot tests: every binding, and the state it leaves behind."""

from __future__ import annotations

import os

from llmtop.model import Snapshot
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.screens.gpu import GpuScreen
from llmtop.ui.screens.help import HelpScreen, SeekScreen
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.screens.probe import ProbeScreen
from llmtop.ui.screens.raw import RawMetricsScreen
from llmtop.ui.widgets.engines import EnginesTable
from llmtop.ui.widgets.panels import EventLog

from .conftest import FakeReplay, first_paint, make_app


def table_keys(app) -> list[str]:
    return list(app.screen.query_one(EnginesTable).row_keys)


async def test_q_quits():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_ctrl_c_quits():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0


async def test_sort_column_and_order():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        assert app.state.sort_column == "name"
        assert table_keys(app)[0].startswith("sglang")
        await pilot.press("s")  # state
        assert app.state.sort_column == "state"
        await pilot.press("s")  # run: most running first
        await pilot.pause()
        assert app.state.sort_column == "run"
        assert table_keys(app)[0].startswith("vllm")
        await pilot.press("S")
        await pilot.pause()
        assert app.state.sort_reverse is True
        assert table_keys(app)[0].startswith("triton")


async def test_filter_and_escape():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("slash")
        assert app.focused.id == "filter"
        await pilot.press("s", "g", "l")
        await pilot.pause()
        assert app.state.filter_text == "sgl"
        assert table_keys(app) == ["sglang@127.0.0.1:30000|Qwen/Qwen2.5-7B-Instruct"]
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.focused, EnginesTable)
        assert app.state.filter_text == "sgl"
        await pilot.press("escape")
        await pilot.pause()
        assert app.state.filter_text == ""
        assert len(table_keys(app)) == 3


async def test_pause_with_p_and_space():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("p")
        assert app.state.paused is True
        await pilot.press("space")
        assert app.state.paused is False


async def test_paused_freezes_the_screen_but_keeps_sampling():
    snaps = [demo_snapshot("ok"), demo_snapshot("pressure")]
    src = FakeSource(snapshots=lambda n: snaps[min(n, 1)])
    app = make_app(source=src)
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("p")
        await app.poll_once()
        await pilot.pause()
        assert src.ticks == 2
        assert "97%" not in str(app.screen.query_one(EnginesTable).get_row_at(2))
        await pilot.press("p")
        await pilot.pause()
        assert "97%" in str(app.screen.query_one(EnginesTable).get_row_at(2))


async def test_interval_keys():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        assert app.state.interval_s == 1.0
        await pilot.press("plus")
        assert app.state.interval_s == 2.0
        await pilot.press("minus", "minus")
        assert app.state.interval_s == 0.5


async def test_refresh_now_ticks():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        before = app.source.ticks
        await pilot.press("R")  # r opens the requests screen
        await pilot.pause()
        await pilot.pause()
        assert app.source.ticks == before + 1


async def test_enter_opens_detail_and_escape_closes():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        assert app.screen.key == "vllm@127.0.0.1:8000|meta-llama/Llama-3.1-8B-Instruct"
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, RawMetricsScreen)
        assert app.screen.query_one("#raw-table").row_count == 12
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_raw_metrics_filter_and_rates():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        app.push_screen(RawMetricsScreen(app, "vllm@127.0.0.1:8000"))
        await pilot.pause()
        table = app.screen.query_one("#raw-table")
        rows = [[c.plain.strip() for c in table.get_row_at(i)] for i in range(table.row_count)]
        gen = next(r for r in rows if r[0] == "vllm:generation_tokens_total")
        assert gen[2] == "1.9k"  # (1_203_400 - 1_201_538) / 1 s
        assert next(r for r in rows if r[3] == "gauge")[2] == ""
        await pilot.press("slash", "k", "v")
        await pilot.pause()
        assert table.row_count == 1


async def test_g_opens_gpus():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GpuScreen)
        assert len(app.screen_stack) == 3  # default, overview, gpus
        await pilot.press("escape")
        assert isinstance(app.screen, OverviewScreen)


async def test_t_cycles_themes():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        assert app.theme == "dark"
        seen = []
        for _ in range(4):
            await pilot.press("t")
            await pilot.pause()
            seen.append(app.theme)
        assert seen == ["light", "high-contrast", "mono", "dark"]


async def test_theme_flag_and_no_color(monkeypatch):
    assert make_app(theme="light").theme == "light"
    assert make_app(theme="nope").theme == "dark"
    monkeypatch.setenv("NO_COLOR", "1")
    assert make_app().theme == "mono"


async def test_user_theme_is_loaded(tmp_path, monkeypatch):
    d = tmp_path / "cfg" / "llmtop" / "themes"
    d.mkdir(parents=True)
    (d / "solar.toml").write_text('name = "solar"\n[colors]\nprimary = "#b58900"\n')
    (d / "broken.toml").write_text("name = [")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    app = make_app(theme="solar")
    assert app.theme == "solar"
    assert app.theme_errors and "broken.toml" in app.theme_errors[0]


def _svgs(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.endswith(".svg")]


async def test_ctrl_s_saves_a_screenshot(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
    assert _svgs(tmp_path)


async def test_f_folds_out_ranks():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        assert len(table_keys(app)) == 3
        await pilot.press("f")
        await pilot.pause()
        assert app.state.show_ranks is True
        keys = table_keys(app)
        assert keys[-2:] == ["vllm@127.0.0.1:8000|meta-llama/Llama-3.1-8B-Instruct|0",
                             "vllm@127.0.0.1:8000|meta-llama/Llama-3.1-8B-Instruct|1"]


async def test_help_opens_and_escape_closes():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_poller_exception_becomes_an_event_and_polling_goes_on():
    src = FakeSource.demo(fail_on={1})
    app = make_app(source=src)
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await app.poll_once()  # raises inside the source
        await pilot.pause()
        await app.poll_once()
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert src.ticks == 3
        log = app.screen.query_one(EventLog)
        assert any("simulated poller failure" in line[3] for line in log.lines)


async def test_empty_and_changing_rows_keep_their_place():
    snaps = [Snapshot(time=1.0, window_s=10.0), demo_snapshot("ok"), demo_snapshot("down")]
    src = FakeSource(snapshots=lambda n: snaps[min(n, 2)])
    app = make_app(source=src)
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        assert table_keys(app) == []
        for _ in range(2):
            await app.poll_once()
            await pilot.pause()
            app.paint()
            await pilot.pause()
        keys = table_keys(app)
        assert len(keys) == 3 and keys[1].startswith("triton")
        row = app.screen.query_one(EnginesTable).get_row_at(1)
        assert str(row[1]) == "DOWN"


async def test_resize_switches_columns_without_breaking():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = app.screen.query_one(EnginesTable)
        assert len(table.columns) == 9  # CAP from CAP_MIN_WIDTH
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert len(table.columns) == 13
        assert app.screen.has_class("-tall")
        await pilot.resize_terminal(60, 15)
        await pilot.pause()
        assert len(table.columns) == 8
        assert table.row_count == 3


async def test_probe_key_opens_probe_screen_with_the_selected_target():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down", "l")
        await pilot.pause()
        assert isinstance(app.screen, ProbeScreen)
        assert app.screen.target == "vllm@127.0.0.1:8000"
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_replay_keys_only_with_replay_control():
    app = make_app()
    async with app.run_test() as pilot:
        await first_paint(app, pilot)
        await pilot.press("x", "colon")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        assert app.check_action("replay_speed", ()) is False


async def test_replay_keys_drive_the_control():
    ctl = FakeReplay()
    app = make_app(source=FakeSource.demo(replay=ctl))
    async with app.run_test(size=(120, 30)) as pilot:
        await first_paint(app, pilot)
        header = str(app.screen.query_one("#header").render())
        assert "REPLAY" in header and "2026-11-18 11:06:40" in header
        await pilot.press("p")
        assert ctl.playing is False and app.state.paused is False
        await pilot.press("x", "x")
        assert ctl.speed == 60.0
        await pilot.press("comma", "full_stop")
        await pilot.press("left_square_bracket", "right_square_bracket")
        await pilot.press("left_curly_bracket", "right_curly_bracket")
        assert ("step", -1) in ctl.calls and ("step", 1) in ctl.calls
        assert [c[1] for c in ctl.calls if c[0] == "jump"] == [-60, 60, -600, 600]
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, SeekScreen)
        await pilot.press(*"03:12", "enter")
        await pilot.pause()
        assert ("seek", "03:12") in ctl.calls
        # the probe is disabled in replay
        await pilot.press("l")
        await pilot.pause()
        assert not isinstance(app.screen, ProbeScreen)


async def test_verdict_changes_are_logged_without_flapping():
    snaps = [demo_snapshot("ok"), demo_snapshot("pressure"), demo_snapshot("down")]
    order = [0, 1, 2, 1, 2, 1, 2, 1]
    src = FakeSource(snapshots=lambda n: snaps[order[min(n, len(order) - 1)]], events=[])
    app = make_app(source=src)
    async with app.run_test() as pilot:
        for _ in order:
            await app.poll_once()
            await pilot.pause()
        lines = [e.text for e in src.events() if e.text.startswith("verdict:")]
        # OK -> DEGRADED -> CRITICAL logged at once; flapping back is held for VERDICT_LOG_S
        assert [t.split(" ")[1] for t in lines] == ["DEGRADED", "CRITICAL"]


def test_the_store_keeps_series_for_the_fastest_interval_the_keys_offer():
    from llmtop.history.store import FASTEST_INTERVAL_S
    from llmtop.ui.state import INTERVALS

    assert min(INTERVALS) == FASTEST_INTERVAL_S
