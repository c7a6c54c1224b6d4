"""``TextLines``: no-wrap Rich Text drawn a line at a time.

The overview's panels change every second. ``Static`` turns each new Text into Content,
wraps it and renders it whole, which cost more CPU than the panels' data. Here each line is
rendered to a strip once and kept until that line, the width or the style changes.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

__all__ = ["TextLines", "same"]


def same(a: Text, b: Text) -> bool:
    """Whether two Texts draw the same (``Text.__eq__`` ignores the base style)."""
    return a == b and a.style == b.style


class TextLines(Widget):
    """Shows ``Text`` without wrapping: ``set_text`` for fixed content, or override ``build``
    for content that follows the widget's size (call ``rebuild`` when its data change).

    Each line is cut to the width the way the Text asks (``overflow``: ``ellipsis`` or
    ``crop``). ``render()`` returns the whole Text as drawn now (tests, screenshots)."""

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._text = Text()
        self._tl_lines: list[Text] = []
        self._tl_built: Size | None = None
        self._tl_strips: dict[int, tuple[Text, int, object, Strip]] = {}
        self._tl_style: Style | None = None

    def build(self, width: int, height: int) -> Text:
        """The text for a content area of ``width`` x ``height`` (default: ``set_text``'s)."""
        return self._text

    def set_text(self, text: Text) -> None:
        """Show ``text``; nothing happens when it equals what is shown."""
        if same(text, self._text):
            return
        layout = text.plain.count("\n") != self._text.plain.count("\n")
        self._text = text
        self.rebuild(layout=layout)

    def rebuild(self, *, layout: bool = False) -> None:
        """The content changed: build it again. On the current screen, at the size it was
        last drawn at, it is built now and only the lines that differ are repainted (none:
        nothing is); otherwise it is built at the next paint, whole."""
        size = self.size
        if (layout or self._tl_built != size or not size.width or not self.display
                or not self.is_attached or self.screen is not self.app.screen):
            self._tl_built = None
            self.refresh(layout=layout)
            return
        old = self._tl_lines
        new = self._tl_lines = self.build(size.width, size.height).split("\n", allow_blank=True)
        n = min(len(old), len(new))
        changed = [y for y in range(n) if not same(old[y], new[y])]
        changed += range(n, max(len(old), len(new)))
        if changed:
            self.refresh(*(Region(0, y, size.width, 1) for y in changed))

    def render(self) -> Text:  # type: ignore[override]
        return self.build(self.size.width, self.size.height)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.build(width, container.height).split("\n", allow_blank=True))

    def _current_lines(self) -> list[Text]:
        size = self.size
        if self._tl_built != size:
            self._tl_lines = self.build(size.width, size.height).split("\n", allow_blank=True)
            self._tl_built = size
        return self._tl_lines

    def render_lines(self, crop: Region) -> list[Strip]:
        self._tl_style = self.rich_style  # once per pass, not once per line
        try:
            return super().render_lines(crop)
        finally:
            self._tl_style = None

    def render_line(self, y: int) -> Strip:
        lines = self._current_lines()
        width = self.size.width
        style = self._tl_style if self._tl_style is not None else self.rich_style
        if y >= len(lines) or width <= 0:
            return Strip.blank(width, style)
        line = lines[y]
        hit = self._tl_strips.get(y)
        if hit is not None and hit[1] == width and hit[2] == style and same(hit[0], line):
            return hit[3]
        cut = line.copy()
        if cut.cell_len > width:
            cut.truncate(width, overflow=line.overflow or self._text.overflow or "crop")
        if cut.style and not cut.spans:  # Text.render leaves the base style out then
            cut.stylize(cut.style)
        segments = list(cut.render(self.app.console))
        length = Segment.get_line_length(segments)
        if length > width:  # wider than it says (wide characters at the edge): crop it
            strip = Strip(segments, length).crop_extend(0, width, None).apply_style(style)
        else:  # what crop_extend and apply_style make, as one Strip instead of three
            if length < width:
                segments.append(Segment(" " * (width - length)))
            strip = Strip(list(Segment.apply_style(segments, style)), width)
        self._tl_strips[y] = (line, width, style, strip)  # one per line: bounded by height
        return strip
