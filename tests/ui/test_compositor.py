"""CropCompositor: a partial update renders only its own lines, and draws what Textual's
compositor draws on every line it repaints."""

from __future__ import annotations

import pytest
from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from llmtop.ui.compositor import CropCompositor
from llmtop.ui.screens.overview import OverviewScreen
from tests.ui.conftest import first_paint, make_app

SIZE = (120, 40)


def _lines(comp: Compositor, crop: Region, base: bool, lines: set[int] | None = None
           ) -> dict[int, list]:
    """The strips a partial update over ``crop`` sends on ``lines`` (default: all the
    crop's): with Textual's own ``_get_renders`` when ``base``, else the compositor's."""
    lines = set(range(crop.y, crop.bottom)) if lines is None else lines
    if base:
        comp._get_renders = lambda c=None: Compositor._get_renders(comp, c)  # type: ignore
    try:
        chops = comp._render_chops(crop, lines.__contains__)
    finally:
        comp.__dict__.pop("_get_renders", None)
    return {y: list(Strip.join([s for s in chops[y].values() if s is not None]))
            for y in sorted(lines)}


@pytest.mark.parametrize("size", [(80, 24), SIZE, (160, 48)])
async def test_partial_updates_draw_what_textual_draws(size):
    app = make_app("ok")
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        comp = screen._compositor
        assert isinstance(comp, CropCompositor)
        w, h = size
        for crop in (Region(0, 0, w, 1), Region(0, 0, w, 4), Region(0, 3, w, 1),
                     Region(0, 7, w, 5), Region(0, h - 1, w, 1), Region(0, 20, w, 3),
                     Region(0, 1, w, h - 2), Region(10, 2, 30, 6)):
            mine, textuals = _lines(comp, crop, False), _lines(comp, crop, True)
            assert mine == textuals, crop
            assert any(segs for segs in mine.values())
        # an update of the clock line, a table row and two sparkline lines: only those
        for lines in ({0, 3}, {0, 3, 7, 8}, {1, 5, 6, h - 2, h - 1}):
            crop = Region.from_union([Region(0, y, w, 1) for y in lines])
            mine = _lines(comp, crop, False, lines)
            assert mine == _lines(comp, crop, True, lines), lines
            assert all(mine[y] for y in lines)


async def test_an_update_renders_only_its_lines_of_the_front_widgets(monkeypatch):
    app = make_app("ok")
    async with app.run_test(size=SIZE) as pilot:
        await first_paint(app, pilot)
        comp = app.screen._compositor
        rendered: list[tuple[str, int]] = []
        original = Widget.render_lines

        def spy(self, crop):
            rendered.append((type(self).__name__, crop.height))
            return original(self, crop)

        monkeypatch.setattr(Widget, "render_lines", spy)
        comp._render_chops(Region(0, 0, SIZE[0], 1), lambda y: y == 0)  # the clock line
        # the header draws the whole line: the screen behind it is not rendered at all
        assert rendered == [("HeaderBar", 1)]
        rendered.clear()  # the clock line and the engine row: not the lines between
        comp._render_chops(Region(0, 0, SIZE[0], 4), {0, 3}.__contains__)
        assert sorted(rendered) == [("EnginesTable", 1), ("HeaderBar", 1)]
