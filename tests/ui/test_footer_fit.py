"""Issue 27: at 80 columns every screen's footer shows whole keys only, the least important
dropped first (``widgets.footer.RANK``); ``?`` lists them all."""

from __future__ import annotations

import pytest
from textual.binding import Binding
from textual.widgets import Input

from llmtop.config import Config, PrometheusConfig
from llmtop.ui.app import LlmtopApp
from llmtop.ui.fake import FakeSource
from llmtop.ui.screens.help import HelpScreen, binding_sections
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.footer import DEFAULT_RANK, RANK, fit_keys, key_width

from .conftest import FakeReplay, first_paint, make_app

WALK = (((), "overview"), (("enter",), "detail"), (("enter", "m"), "raw"), (("g",), "gpus"),
        (("w",), "why"), (("l",), "probe"), (("l", "f"), "probe, form hidden"),
        (("question_mark",), "help"))


def _labels(app) -> set[str]:
    """Every whole ``key Description`` label the current screen could show."""
    out = set()
    for _n, b, _e, _t in app.screen.active_bindings.values():
        if b.show:
            out.add(f"{app.get_key_display(b)} {b.description}".strip())
    return out


def _segments(line: str) -> list[str]:
    return [s.strip() for s in line.strip().split("  ") if s.strip()]


async def _walk(app, pilot, mode: str, walk=WALK) -> dict[str, list[str]]:
    await first_paint(app, pilot)
    seen = {}
    for keys, name in walk:
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        if isinstance(app.focused, Input):  # it hides the letter keys: test the worst case
            app.screen.set_focus(None)
        await pilot.pause()
        app.paint()
        await pilot.pause()
        footer = screen_lines(app)[-1]
        segs = _segments(footer)
        if not isinstance(app.screen, HelpScreen):
            labels = _labels(app)
            cut = [s for s in segs if s not in labels]
            assert not cut, f"{mode} {name}: cut or unknown key {cut} in {footer!r}"
            assert "q Quit" in segs and "? Help" in segs, f"{mode} {name}: {footer!r}"
            if name != "overview":
                assert any(s.startswith("esc ") for s in segs), f"{mode} {name}: {footer!r}"
            if mode == "replay":
                assert "x Speed" in segs and ": Seek" in segs, f"{mode} {name}: {footer!r}"
        seen[name] = segs
        while len(app.screen_stack) > 2:
            app.pop_screen()
            await pilot.pause()
    return seen


async def test_live_screens_at_80_columns_show_whole_keys():
    app = make_app("ok")
    async with app.run_test(size=(80, 24)) as pilot:
        seen = await _walk(app, pilot, "live")
    # the old cut: "… l Prob" on the probe screen; now whole, Chart dropped before Start;
    # l (it opened this screen) is not offered again on it
    assert "l Probe" not in seen["probe, form hidden"]
    assert "^r Start" in seen["probe, form hidden"] and "f Form" in seen["probe, form hidden"]
    assert "v Chart" in seen["probe, form hidden"]  # room left by l


async def test_replay_screens_at_80_columns_keep_the_replay_keys():
    app = make_app(source=FakeSource.demo(replay=FakeReplay()))
    async with app.run_test(size=(80, 24)) as pilot:
        seen = await _walk(app, pilot, "replay", walk=[w for w in WALK if "l" not in w[0]])
    assert "S Order" not in seen["overview"] and "s Sort" in seen["overview"]


async def test_fleet_screens_at_80_columns_show_whole_keys():
    from fleet.test_bad_input import _server  # the fleet tests' fake Prometheus

    from llmtop.cli.fleet import tui_config
    from llmtop.fleet.monitor import FleetMonitor
    from llmtop.ui.source import FleetSource

    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
    app = LlmtopApp(FleetSource(FleetMonitor(cfg, transport=_server())), tui_config(cfg))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.5)
        await _walk(app, pilot, "fleet", walk=(((), "overview"), (("down", "enter"), "detail"),
                                               (("w",), "why")))


async def test_wide_terminal_shows_every_key():
    app = make_app("ok")
    async with app.run_test(size=(200, 30)) as pilot:
        await first_paint(app, pilot)
        segs = _segments(screen_lines(app)[-1])
    assert {"s Sort", "S Order", "f Ranks", "l Probe", "g GPUs"} <= set(segs)


def test_fit_drops_the_least_important_first_and_keeps_footer_order():
    keys = [("sort", 8), ("quit", 8), ("sort_reverse", 9), ("help", 8), ("probe", 9)]
    assert fit_keys(keys, 100) == [0, 1, 2, 3, 4]
    assert fit_keys(keys, 34) == [0, 1, 3, 4]  # Order (rank 5) goes first
    assert fit_keys(keys, 16) == [1, 3]  # quit and help always come first
    assert fit_keys(keys, 10) == [1]
    assert key_width("esc", "Back") == 10  # " esc " + "Back "


@pytest.mark.parametrize("section", [s for s, _ in binding_sections(LlmtopApp.BINDINGS)])
def test_every_shown_binding_has_a_footer_rank(section):
    """A new key gets a rank on purpose (else it is dropped first); help lists them all."""
    for title, bindings in binding_sections(LlmtopApp.BINDINGS):
        if title == section:
            missing = [b.key for b in bindings if isinstance(b, Binding) and b.show
                       and RANK.get(b.id or "", DEFAULT_RANK) == DEFAULT_RANK]
            assert not missing, f"{section}: no footer rank for {missing}"


async def test_the_footer_refits_when_the_terminal_shrinks():
    app = make_app(source=FakeSource.demo(replay=FakeReplay()))
    async with app.run_test(size=(200, 30)) as pilot:
        await first_paint(app, pilot)
        assert "S Order" in _segments(screen_lines(app)[-1])
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        segs = _segments(screen_lines(app)[-1])
        assert not [s for s in segs if s not in _labels(app)], segs
        assert "S Order" not in segs and "x Speed" in segs and "q Quit" in segs
        await pilot.resize_terminal(200, 30)
        await pilot.pause()
        await pilot.pause()
        assert "S Order" in _segments(screen_lines(app)[-1])
