"""Scrollbars whose thumb is drawn in whole cells.

Textual draws a thumb's ends with partial-block glyphs (``▁``..``▇``) for sub-cell
precision. With a dim thumb colour, or in any plain-text view of the screen, only the glyph
shows, and beside a table it reads as a stray sparkline cell (``▄▄`` next to the detail
screen's rows, ``▇`` right of the raw browser's first row). ``WholeCellScrollBarRender``
draws the thumb as whole reversed cells, like htop and k9s do.
"""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender

__all__ = ["WholeCellScrollBarRender", "use_whole_cell_scrollbars"]


class WholeCellScrollBarRender(ScrollBarRender):
    """A scrollbar thumb without partial-block ends (blank glyphs are never drawn)."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


def use_whole_cell_scrollbars() -> None:
    """Make every scrollbar draw whole cells (Textual's documented way to change the
    renderer: ``ScrollBar.renderer``). Idempotent."""
    ScrollBar.renderer = WholeCellScrollBarRender
