"""A key that does nothing in a mode is not offered there: neither the footer nor help (``?``)
lists it, and pressing it does nothing. Replay turns the probe off (``l Probe`` was offered);
fleet mode has no API URL to probe (``l`` said ``could not start: TypeError``) and keeps
no raw scrape (``m`` said ``no raw families kept for this target``); ``c``
(fold a model) and ``T`` (time travel) are fleet mode's; the replay keys replay's; and the
key that opened a screen is not offered again on it (``l Probe`` on the probe screen)."""

from __future__ import annotations

import pytest

from llmtop.ui.fake import FakeSource
from llmtop.ui.screens.help import HelpScreen
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.textshot import screen_lines

from .conftest import FakeReplay, first_paint, make_app


class _FleetLike(FakeSource):
    """A source with fleet mode's ``travel`` (``FleetSource``)."""

    def travel(self, text: str) -> str | None:
        return None


def _source(mode: str) -> FakeSource:
    if mode == "replay":
        return FakeSource.demo(replay=FakeReplay())
    if mode == "fleet":
        return _FleetLike.demo()
    return FakeSource.demo()


async def _footer_and_help(mode: str) -> tuple[str, str]:
    app = make_app(source=_source(mode))
    async with app.run_test(size=(200, 40)) as pilot:
        await first_paint(app, pilot)
        footer = screen_lines(app)[-1]
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = app.screen.plain_text(width=120)
    return footer, help_text


@pytest.mark.parametrize(("mode", "offered", "not_offered"), [
    ("live", ["l Probe", "Raw metrics"],
     ["x Speed", ": Seek", "Time travel", "Collapse", "Step back"]),
    ("replay", ["x Speed", ": Seek"], ["l Probe", "Load probe", "Time travel", "Collapse"]),
    ("fleet", ["Time travel", "Collapse"], ["l Probe", "Load probe", "x Speed", "Step back",
                                            "Raw metrics"]),
])
async def test_each_mode_offers_only_the_keys_that_work(mode, offered, not_offered):
    footer, help_text = await _footer_and_help(mode)
    flat_help = " ".join(help_text.split())
    for label in offered:
        desc = label.rpartition(" ")[2]
        assert desc in flat_help, (mode, label)
    for label in not_offered:
        assert label not in footer, (mode, label, footer)
        desc = label.rpartition(" ")[2] if label.startswith(("l ", "x ", ": ")) else label
        assert desc not in flat_help, (mode, label)


@pytest.mark.parametrize("mode", ["replay", "fleet"])
async def test_the_probe_key_does_nothing_where_it_is_not_offered(mode):
    app = make_app(source=_source(mode))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        assert app.check_action("probe", ()) is False


@pytest.mark.parametrize(("key", "label"), [("l", "l Probe"), ("g", "g GPUs"),
                                            ("w", "w Why")])
async def test_a_screen_does_not_offer_the_key_that_opened_it(key, label):
    app = make_app()
    async with app.run_test(size=(200, 40)) as pilot:
        await first_paint(app, pilot)
        assert label in screen_lines(app)[-1]
        await pilot.press(key)
        await pilot.pause()
        app.screen.set_focus(None)  # the probe form's Input would hide letter keys
        await pilot.pause()
        assert label not in screen_lines(app)[-1]


async def test_fleet_detail_offers_no_raw_metrics():
    app = make_app(source=_source("fleet"))
    async with app.run_test(size=(120, 40)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert type(detail).__name__ == "EngineDetailScreen"
        text = "\n".join(screen_lines(app))
        assert "Raw metrics" not in screen_lines(app)[-1] and "m: raw" not in text
        await pilot.press("m")
        await pilot.pause()
        assert app.screen is detail


@pytest.mark.parametrize(("mode", "key", "want"), [
    ("replay", "colon", "Enter to go"),
    ("fleet", "T", "or now; Enter to go"),
])
async def test_the_seek_box_prompt_is_whole_at_80_columns(mode, key, want):
    """The box cut its prompt to ``... (+5m, -90s); E``; fleet mode's time travel said Seek."""
    app = make_app(source=_source(mode))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press(key)
        await pilot.pause()
        text = " ".join("".join(ch for ch in line if ch not in "│╭╮╰╯─").strip()
                        for line in screen_lines(app))
        text = " ".join(text.split())
    assert want in text, text
    assert ("Time travel" in text) == (mode == "fleet")
