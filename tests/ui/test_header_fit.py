"""The header's first line at 80 columns: fleet mode's long host (``prometheus URL · window
60s · LIVE``) cut ``every 1s`` to ``ever…`` and pushed PAUSED / REPLAY off the screen."""

from __future__ import annotations

from rich.cells import cell_len

from llmtop.ui.fake import FakeSource
from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.panels import header_line

from .conftest import FakeReplay, first_paint, make_app

FLEET_HOST = "prometheus http://127.0.0.1:60137 · window 60s · LIVE"


def test_everything_fits_wide():
    t = header_line("demo-host", "11:06:40", "every 1s", "10s", [], 120).plain
    assert t == "llmtop  demo-host  11:06:40  every 1s  10s"


def test_badges_and_clock_stay_whole_the_window_and_interval_go_first():
    t = header_line(FLEET_HOST, "16:34:42", "every 10s", "60s", ["PAUSED"], 90).plain
    assert t == f"llmtop  {FLEET_HOST}  16:34:42  every 10s  PAUSED"
    t = header_line(FLEET_HOST, "16:34:42", "every 10s", "60s", ["PAUSED"], 78).plain
    assert cell_len(t) <= 78 and "ever" not in t  # dropped whole, never a cut label
    # the URL is cut, the fleet state (window, LIVE) kept
    assert t == ("llmtop  prometheus http://127.0.0.1:601\u2026 \u00b7 window 60s \u00b7 LIVE"
                 "  16:34:42  PAUSED")
    t = header_line("h" * 100, "16:34:42", "every 10s", "60s", ["PAUSED"], 60).plain
    assert cell_len(t) == 60 and t.endswith("h\u2026  16:34:42  PAUSED")


def test_unknown_width_keeps_the_whole_line():
    t = header_line(FLEET_HOST, "16:34:42", "every 10s", "60s", [], 0).plain
    assert t.endswith("every 10s  60s")


async def test_paused_shows_at_80_columns_with_a_long_host():
    app = make_app(source=FakeSource.demo(host=FLEET_HOST))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("p")
        await pilot.pause()
        line = screen_lines(app)[0]
    assert "PAUSED" in line and "11:06:40" in line and "LIVE" in line, line


async def test_replay_badge_shows_at_80_columns_with_a_long_host():
    app = make_app(source=FakeSource.demo(host="/var/tmp/recordings/" + "x" * 60 + ".jsonl",
                                          replay=FakeReplay()))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        line = screen_lines(app)[0]
    assert "REPLAY" in line and "11:06:40" in line, line
