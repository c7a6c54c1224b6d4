"""The engines table fits the terminal: a compact target and the model at every width."""

from __future__ import annotations

import pytest

from llmtop.ui.textshot import screen_lines
from llmtop.ui.widgets.engines import EnginesTable

from .conftest import first_paint, make_app


def _lines(app) -> list[str]:
    table = app.screen.query_one(EnginesTable)
    return [table.render_line(y).text for y in range(table.size.height)]


@pytest.mark.parametrize(("size", "vllm", "sglang"), [
    ((80, 24), "vllm :8000    Llama-3…", "sglang :30000 Qwen2.5…"),  # CAP takes 5 cells
    ((130, 30), "vllm :8000    Llama-3.1-8B-Instruct ", "sglang :30000 Qwen2.5-7B-Instruct "),
    ((160, 48), "vllm :8000    meta-llama/Llama-3.1-8B-Instruct",
     "sglang :30000 Qwen/Qwen2.5-7B-Instruct"),
])
async def test_name_column_fits_the_width(size, vllm, sglang):
    app = make_app("ok")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        lines = _lines(app)
        assert any(line.startswith(" " + vllm) for line in lines), lines
        assert any(line.startswith(" " + sglang) for line in lines), lines
        assert all(len(line.rstrip()) < size[0] for line in lines)
        for col in ("STATE", "RUN", "WAIT", "KV", "TTFT95", "ITL95", "TOK/S"):
            assert col in lines[0]


BADGES = {  # row (start of the name cell) -> the badge the spec names
    "vllm :8000": "BAD PAYLOAD",
    "sglang :30000": "RESTARTED",
    "triton :8002": "STALE 125s",
    "tgi :8003": "HTTP 503",
    "tgi :8004": "UNAUTHORIZED",
    "tgi :8005": "DOWN",
}


def _badge_cells(app) -> dict[str, str]:
    """Row name -> the text of its STATE cell, cut from the screen where STATE starts
    (rows are told apart by their port: the engine name may be cut at 64 columns)."""
    table = app.screen.query_one(EnginesTable)
    lines = _lines(app)
    start = lines[0].index("STATE")
    end = start + table.columns["state"].width  # type: ignore[index]
    out = {}
    for line in lines[1:]:
        row = next((r for r in BADGES if r.split()[-1] + " " in line[:start] + " "), None)
        if row is not None:
            out[row] = line[start:end].rstrip()
    return out


async def test_state_badges_in_full_at_80_columns():
    app = make_app("states")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        assert _badge_cells(app) == BADGES
        screen = screen_lines(app)
        assert all(len(line.rstrip()) <= 80 for line in screen)
        row = next(line for line in screen if line.startswith(" vllm :8000"))
        assert " BAD PAYLOAD " in row and "25/256" in row and "1.9k" in row


async def test_state_badges_at_the_minimum_width():
    """64 columns: every badge whole; UNAUTHORIZED gives way to NO AUTH, not to a cut."""
    app = make_app("states")
    async with app.run_test(size=(64, 24)) as pilot:
        await first_paint(app, pilot)
        assert _badge_cells(app) == {**BADGES, "tgi :8004": "NO AUTH"}
        lines = _lines(app)
        assert all(len(line.rstrip()) < 64 for line in lines), lines
        for col in ("STATE", "RUN", "WAIT", "KV", "TTFT95", "ITL95", "TOK/S"):
            assert col in lines[0]
        await pilot.resize_terminal(65, 24)
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert _badge_cells(app) == BADGES


async def test_resize_keeps_rows_and_cursor():
    app = make_app("ok")
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = app.screen.query_one(EnginesTable)
        await pilot.press("down")
        key = table.selected_key
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert table.selected_key == key
        assert "PFX%" in _lines(app)[0]
        await pilot.resize_terminal(40, 12)
        await pilot.pause()
        assert table.selected_key == key


async def test_tiny_terminal_shows_a_hint_and_the_verdict():
    app = make_app("down")
    async with app.run_test(size=(40, 12)) as pilot:
        await first_paint(app, pilot)
        screen = app.screen
        assert screen.has_class("-tiny")
        hint = str(screen.query_one("#too-small").render())
        assert "Terminal too small (40\u00d712)" in hint
        assert "CRITICAL" in str(screen.query_one("#header").render())
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert not screen.has_class("-tiny")
        assert any(line.startswith(" vllm :8000") for line in _lines(app))


async def test_narrowing_at_the_minimum_height_leaves_no_scrollbar():
    """80x12 -> 64x12 looks like a fresh 64x12: no screen scrollbar taking two columns from
    the table, no table scrollbars taking the row the screen does not have."""
    fresh = make_app("ok")
    async with fresh.run_test(size=(64, 12)) as pilot:
        await first_paint(fresh, pilot)
        expected = screen_lines(fresh)
    app = make_app("ok")
    async with app.run_test(size=(80, 12)) as pilot:
        await first_paint(app, pilot)
        await pilot.resize_terminal(64, 12)
        await pilot.pause()
        app.paint()
        await pilot.pause()
        assert screen_lines(app) == expected
        assert "TOK/S" in expected[2]
