"""Screens pushed over a live overview draw only their own cells.

The "stale sparkline cells" seen beside the detail screen's rows (``▄▄``, ``▃▃``) and right of
the raw browser's first row (``▇``) were the scrollbar thumb's end, which Textual draws with a
partial-block glyph (``▁``..``▇``) on a dim thumb colour: in plain text, or on a dark theme,
only the glyph showed. The thumb is now drawn in whole cells (``widgets/scrollbar.py``), so no
block glyph appears where a screen draws no sparkline or bar.
"""

from __future__ import annotations

import pytest
from textual.scrollbar import ScrollBar

from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

SIZES = [(80, 24), (160, 48)]
BLOCKS = set("\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588")
"""Sparkline / scrollbar-end glyphs."""


async def _push(size: tuple[int, int], keys: tuple[str, ...], scroll: int = 0):
    app = make_app("ok")
    pilot_cm = app.run_test(size=size)
    pilot = await pilot_cm.__aenter__()
    await first_paint(app, pilot)
    for k in keys:
        await pilot.press(k)
        await pilot.pause()
    for _ in range(3):  # the overview keeps painting under the pushed screen
        await app.poll_once()
        await pilot.pause()
        app.paint()
        await pilot.pause()
    for _ in range(scroll):
        await pilot.press("down")
    await pilot.pause()
    return app, pilot_cm


def _cells(lines: list[str], region) -> list[tuple[int, int, str]]:
    out = []
    for y in range(region.y, region.bottom):
        line = lines[y] if y < len(lines) else ""
        for x in range(region.x, min(region.right, len(line))):
            if line[x] in BLOCKS:
                out.append((x, y, line[x]))
    return out


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("keys", "name", "scroll"), [
    (("down", "down", "enter"), "EngineDetailScreen", 0),
    (("down", "down", "enter"), "EngineDetailScreen", 5),
    (("down", "down", "enter", "m"), "RawMetricsScreen", 0),
    (("down", "down", "enter", "m"), "RawMetricsScreen", 7),
    (("question_mark",), "HelpScreen", 0),
    (("question_mark",), "HelpScreen", 4),
])
async def test_no_block_glyphs_on_screens_without_sparklines(size, keys, name, scroll):
    app, cm = await _push(size, keys, scroll)
    try:
        screen = app.screen
        assert type(screen).__name__ == name
        lines = screen_lines(app)
        # help is a modal: the overview shows (dimmed) around its box, so look in the box only
        region = screen.query_one("#help-box").region if name == "HelpScreen" else screen.region
        assert _cells(lines, region) == []
    finally:
        await cm.__aexit__(None, None, None)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_scrollbars_draw_whole_cells(size):
    """The GPU screen draws sparklines and bars, but never in a scrollbar's cells."""
    app, cm = await _push(size, ("g",), 3)
    try:
        lines = screen_lines(app)
        bars = [w for w in app.screen.query(ScrollBar) if w.display and w.region]
        for bar in bars:
            assert _cells(lines, bar.region) == []
    finally:
        await cm.__aexit__(None, None, None)


def test_whole_cell_thumb_at_every_position():
    """At any scroll position the thumb is whole reversed cells: blanks only, never a glyph,
    and at least one cell long."""
    from llmtop.ui.widgets.scrollbar import WholeCellScrollBarRender

    for pos in range(0, 81):
        segs = WholeCellScrollBarRender.render_bar(
            size=20, virtual_size=100, window_size=20, position=pos, thickness=2).segments
        text = "".join(s.text for s in segs if s.text != "\n")
        assert set(text) == {" "}, (pos, text)
        assert sum(1 for s in segs if s.style and s.style.reverse) >= 1
