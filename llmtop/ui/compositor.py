"""A Textual compositor whose partial updates render only the lines they repaint.

Textual's ``Compositor._get_renders(crop)`` keeps every widget whose *container's* clip
overlaps the update, then renders each fully visible one whole: on the overview, a tick that
repaints the clock and one engine row (lines 0-3) also rendered the 40-line screen, the
33-line bottom area, the GPU lines and the footer, and the chops then threw those lines away
(a third of the TUI's CPU at one target, ``benchmarks/tui_cost.py``). ``CropCompositor``
renders each widget's visible part on the update's repainted lines only (the header's clock
line and a row of the table: not the lines between them); what reaches the terminal is the
same (``tests/ui/test_compositor.py`` compares both on every line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

__all__ = ["CropCompositor", "use_crop_compositor"]


class CropCompositor(Compositor):
    """``Compositor`` that renders, for a partial update, only the lines it repaints of
    the widgets that show there."""

    _lines: Callable[[int], bool] | None = None
    """The update's own test of a repainted line, while ``_render_chops`` runs."""

    def _render_chops(self, crop: Region, is_rendered_line: Callable[[int], bool]
                      ) -> Sequence[Mapping[int, Strip]]:
        self._lines = is_rendered_line
        try:
            return super()._render_chops(crop, is_rendered_line)
        finally:
            self._lines = None

    def _get_renders(self, crop: Region | None = None
                     ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if not crop or crop == self.size.region:  # full updates: as Textual does them
            yield from super()._get_renders(crop)
            return
        top, bottom = crop.y, crop.bottom
        wanted = self._lines or (lambda _y: True)
        lines = [y for y in range(top, bottom) if wanted(y)]
        screen_w = self.size.width
        covered: set[int] = set()
        """Lines a widget in front already draws across the whole width: the chops keep
        the first strip of each cut, so nothing behind it there would be seen."""
        for widget, (region, clip) in self.visible_widgets.items():  # front to back
            x, y, width, height = region.intersection(clip)  # the part that shows
            if width <= 0:
                continue
            y_end = y + height
            full = x <= 0 and x + width >= screen_w
            run: list[int] = []
            for line in lines:  # each run of repainted lines the widget shows
                if y <= line < y_end and line not in covered:
                    if full:
                        covered.add(line)
                    if run and line != run[-1] + 1:
                        yield self._run(widget, region, x, width, run)
                        run = []
                    run.append(line)
            if run:
                yield self._run(widget, region, x, width, run)

    @staticmethod
    def _run(widget: Widget, region: Region, x: int, width: int, run: list[int]
             ) -> tuple[Region, Region, list[Strip]]:
        """Lines ``run`` (consecutive, on screen) of ``widget``: ``_render_chops`` draws
        ``region ∩ clip``, so ``shown`` as the clip lines the strips up with them."""
        shown = Region(x, run[0], width, len(run))
        return region, shown, widget.render_lines(
            Region(x - region.x, run[0] - region.y, width, len(run)))


def use_crop_compositor(screen: Screen) -> None:
    """Give ``screen`` a ``CropCompositor`` (call from its ``__init__``, before mounting)."""
    screen._compositor = CropCompositor()
