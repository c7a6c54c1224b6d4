"""A Textual compositor whose partial updates render only the lines they repaint.

Textual's ``Compositor._get_renders(crop)`` keeps every widget whose *container's* clip
overlaps the update, then renders each fully visible one whole: on the overview, a tick that
repaints the clock and one engine row (lines 0-3) also rendered the 40-line screen, the
33-line bottom area, the GPU lines and the footer, and the chops then threw those lines away
(a third of the TUI's CPU at one target, ``benchmarks/tui_cost.py``). ``CropCompositor``
renders each widget's visible part within the update's lines only; what reaches the terminal
is the same (``tests/ui/test_compositor.py`` compares both on every line).
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._compositor import Compositor
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip

__all__ = ["CropCompositor", "use_crop_compositor"]


class CropCompositor(Compositor):
    """``Compositor`` that renders, for a partial update, only the crop's lines of the
    widgets that show there."""

    def _get_renders(self, crop: Region | None = None
                     ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if not crop or crop == self.size.region:  # full updates: as Textual does them
            yield from super()._get_renders(crop)
            return
        top, bottom = crop.y, crop.bottom
        for widget, (region, clip) in self.visible_widgets.items():
            x, y, width, height = region.intersection(clip)  # the part that shows
            y0, y1 = max(y, top), min(y + height, bottom)
            if width <= 0 or y1 <= y0:
                continue
            shown = Region(x, y0, width, y1 - y0)
            # ``_render_chops`` draws ``region ∩ clip``: passing ``shown`` as the clip lines
            # the strips up with the lines rendered
            yield region, shown, widget.render_lines(
                Region(x - region.x, y0 - region.y, width, y1 - y0))


def use_crop_compositor(screen: Screen) -> None:
    """Give ``screen`` a ``CropCompositor`` (call from its ``__init__``, before mounting)."""
    screen._compositor = CropCompositor()
