"""The raw metrics browser fits 80 columns: name, value, rate and type without horizontal
scrolling, long names cut with ``…``, the selected sample shown in full; keyboard-only."""

from __future__ import annotations

import pytest

from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.screens.raw import (
    RawMetricsScreen,
    RawSample,
    fit_columns,
    fit_name,
    fmt_value,
    shared_labels,
)
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

LONG = "vllm:request_time_per_output_token_seconds_bucket"


async def _open_raw(app, pilot) -> None:
    await first_paint(app, pilot)
    await pilot.press("down", "down", "enter", "m")  # vllm row -> detail -> raw metrics
    await pilot.pause()
    assert isinstance(app.screen, RawMetricsScreen)


def _table(app):
    return app.screen.query_one("#raw-table")


def _selected_text(app) -> str:
    return str(app.screen.query_one("#raw-selected").render())


@pytest.mark.parametrize("size", [(80, 24), (64, 24)])
async def test_every_column_fits_without_horizontal_scrolling(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _open_raw(app, pilot)
        table = _table(app)
        assert table.virtual_size.width <= table.size.width - 1  # room for the scrollbar
        assert table.max_scroll_x == 0
        lines = screen_lines(app)
        header = next(line for line in lines if line.lstrip().startswith("metric"))
        assert header.split() == ["metric", "value", "rate/s", "type", "labels"]
        bucket = next(line for line in lines if "le=0.05" in line)
        assert "…_bucket" in bucket and LONG not in bucket  # cut, the suffix kept
        assert "310" in bucket and "histogram" in bucket
        gen = next(line for line in lines if "vllm:generation_tokens_total " in line)
        assert gen.split()[1:4] == ["1203400", "1.9k", "counter"]


async def test_wide_terminal_shows_full_names():
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await _open_raw(app, pilot)
        lines = screen_lines(app)
        assert any(LONG in line and "le=0.05" in line for line in lines)
        assert not any("…" in line for line in lines)


async def test_the_selected_sample_is_shown_in_full():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_raw(app, pilot)
        assert _selected_text(app).startswith("vllm:generation_tokens_total{engine=\"0\"")
        table = _table(app)
        for _ in range(6):  # down to the first bucket (le=0.05)
            await pilot.press("down")
        await pilot.pause()
        assert table.cursor_row == 6
        text = _selected_text(app)
        assert text.startswith(LONG + '{engine="0",le="0.05",model_name="meta-llama/')
        assert "310" in text
        assert "\n".join(screen_lines(app)).count("meta-llama/") == 1  # only in that line


async def test_filter_is_keyboard_only_and_escape_clears_then_goes_back():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open_raw(app, pilot)
        table = _table(app)
        await pilot.press("slash", *"le=0.5", "enter")
        await pilot.pause()
        assert table.row_count == 1 and table.has_focus
        assert "1 of 12 samples" in screen_lines(app)[0]
        await pilot.press("escape")  # clears the filter, stays
        await pilot.pause()
        assert isinstance(app.screen, RawMetricsScreen) and table.row_count == 12
        await pilot.press("slash", *"nothing-like-this")
        await pilot.pause()
        assert table.row_count == 0
        assert "no sample matches" in _selected_text(app)
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)


async def test_resize_refits_the_columns():
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await _open_raw(app, pilot)
        await pilot.press("down", "down")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        table = _table(app)
        assert table.max_scroll_x == 0 and table.cursor_row == 2


def test_fit_name_keeps_the_suffix():
    assert fit_name(LONG, 60) == LONG
    assert fit_name(LONG, 30) == "vllm:request_time_per_…_bucket"
    assert fit_name("vllm:some_very_long_gauge_name", 20) == "vllm:some_very_long…"
    assert all(len(fit_name(LONG, w)) == w for w in range(1, len(LONG)))


@pytest.mark.parametrize(("v", "text"), [
    (1203400.0, "1203400"), (85520809984.0, "85520809984"), (1795360123.45, "1795360123.5"),
    (0.0421, "0.0421"), (1.23456789e-05, "1.234568e-05"), (-1.23456789e-05, "-1.23457e-05"),
    (float("nan"), "nan"), (float("inf"), "inf"), (0.1 + 0.2, "0.3"),
])
def test_values_keep_their_digits_within_12_cells(v, text):
    assert fmt_value(v) == text


def _s(name: str, **labels: str) -> RawSample:
    return RawSample(name, "1", "", "gauge", tuple(sorted(labels.items())))


def test_labels_shared_by_every_sample_leave_the_labels_column():
    rows = [_s("a", model="m", le="1"), _s("a", model="m", le="2"), _s("b", model="m"),
            _s("c", gpu="0")]
    assert shared_labels(rows) == {("model", "m")}  # gpu: on one sample only


def test_columns_fit_any_width_from_64():
    rows = [RawSample(LONG, "-1.23457e-05", "958k", "histogram", (("le", "+Inf"),))]
    for width in range(64, 200):
        lay = fit_columns(rows, ["le=+Inf"], width)
        total = lay.name + lay.value + lay.rate + lay.type + lay.labels + 5
        assert total <= width - 1, (width, lay)
        assert lay.labels >= len("le=+Inf")
