"""``RowTable``: keyed rows of one-line cells on Textual's line API, one cached strip a row.

It draws what a ``DataTable`` with ``cursor_type="row"`` and no cell padding draws (the same
segments, styles and component classes: header, cursor, hover) without DataTable's cost:
DataTable throws every row's rendered line away after any cell update; here a row's line is
kept until that row's cells, its place, the cursor or mouse hover on it, the width, the
horizontal scroll or the styles change. The header stays at the top; rows scroll under it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual._segment_tools import line_crop
from textual.binding import Binding
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip

__all__ = ["RowMessage", "RowTable", "TableColumn", "same_cells"]

_EMPTY = Text("")


@dataclass(slots=True)
class TableColumn:
    """A laid-out column: its key, header label and width in cells (gap included)."""

    key: str
    label: Text
    width: int


_HEADER = "row-table--header"
_CURSOR = "row-table--cursor"
_HOVER = "row-table--hover"
_HEADER_HOVER = "row-table--header-hover"
_COMPONENTS = (_HEADER, _CURSOR, _HOVER, _HEADER_HOVER)


def same_cells(a: list[Text], b: list[Text]) -> bool:
    """Cells that draw the same (``Text.__eq__`` ignores the base style and justify)."""
    return len(a) == len(b) and all(
        x.plain == y.plain and x.style == y.style and x.justify == y.justify
        and x.spans == y.spans for x, y in zip(a, b, strict=True))


class RowMessage(Message):
    """A message about one row of a ``RowTable``: its index and key."""

    def __init__(self, table: RowTable, cursor_row: int, row_key: str) -> None:
        self.table = table
        self.cursor_row = cursor_row
        self.row_key = row_key
        super().__init__()

    @property
    def control(self) -> RowTable:
        return self.table


class RowTable(ScrollView, can_focus=True):
    """A table of keyed rows of one-line cells, drawn with the line API.

    Each row's line is a ``Strip`` kept until that row's cells, its place, the cursor or
    mouse hover on it, the width or the styles change: a snapshot that changes one row
    redraws one line, a cursor move two. The look is DataTable's with ``cursor_type="row"``
    and no cell padding (the same segments, styles and component classes: header, cursor,
    hover); the header stays at the top while the rows scroll under it.
    """

    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .row-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .row-table--header {
                background-tint: $foreground 5%;
            }
        }
        & > .row-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .row-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .row-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .row-table--hover {
            background: $block-hover-background;
        }
        & > .row-table--header-hover {
            background: $accent 30%;
        }
    }
    """

    COMPONENT_CLASSES = set(_COMPONENTS)

    BINDINGS = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "cursor_first", "First row", show=False),
        Binding("end,ctrl+end", "cursor_last", "Last row", show=False),
    ]

    class RowHighlighted(RowMessage):
        """The cursor is on another row (keys, mouse, or the rows changed under it)."""

    class RowSelected(RowMessage):
        """Enter on a row, or a click on the row under the cursor."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.show_cursor = True
        self.columns: dict[str, TableColumn] = {}
        """The visible columns, in order."""
        self._table_w = 0
        self._order: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: dict[str, list[Text]] = {}
        """Row key -> its cells (one per visible column) as last painted."""
        self._later: dict[str, Callable[[], list[Text]]] = {}
        """Row key -> how to make its new cells, when first needed (``set_cells_later``)."""
        self._cursor = 0
        self._announced: str | None = None
        """The row key of the last ``RowHighlighted``."""
        self._hover_row = 0
        self._show_hover = False
        self._size_pending = False
        # line caches: (signature, strip); the signature holds the style token
        self._strips: dict[str, tuple[tuple, Strip]] = {}
        self._header: tuple[tuple, Strip] | None = None
        self._blank: tuple[tuple[int, int], Strip] | None = None
        self._style_epoch = 0
        self._style_key: tuple | None = None
        self._styles: tuple[Style, Style, Style, Style, Style] | None = None
        self._style_token = 0
        self._pass: tuple[int, int, int] | None = None
        """(width, scroll x, scroll y) during one ``render_lines``."""
        # style and segment caches, emptied when the styles change
        self._row_styles_cache: dict[tuple[bool, bool, bool], tuple[Style, Style, Style]] = {}
        """(header, cursor, hover) -> ``_row_styles``."""
        self._cell_styles: dict[tuple[int, int, bool, bool], Style] = {}
        """(row, column or -1 for the rest of the line, cursor, hover) -> that cell's style
        (the row's, its row/column meta, the cursor's or hover's over it)."""
        self._inner: dict[tuple, list[tuple[str, Style | None]]] = {}
        """A cell's look (text, style, justify, spans, width) -> its segments' (text, style)."""
        self._drawn: dict[tuple, list[Segment]] = {}
        """(a cell's look, its style, post style) -> its segments."""

    # -- styles -----------------------------------------------------------------------------
    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_epoch += 1
        self.refresh()

    def _check_styles(self) -> None:
        """Work out the base, header, cursor and hover styles when anything they come from
        may have changed (CSS applied again, focus, hover); otherwise keep them: Textual
        forgets its component-style cache on every refresh."""
        comp = self._component_styles
        key = (self._style_epoch, self.get_pseudo_class_state(),
               *(comp.get(name) for name in _COMPONENTS))
        if key == self._style_key:  # the component styles compare by identity first
            return
        self._style_key = key
        styles = (self.rich_style, self.get_component_styles(_HEADER).rich_style,
                  self.get_component_rich_style(_CURSOR), self.get_component_rich_style(_HOVER),
                  self.get_component_rich_style(_HEADER_HOVER))
        if styles != self._styles:
            self._styles = styles
            self._style_token += 1
            self._row_styles_cache.clear()
            self._cell_styles.clear()
            self._drawn.clear()

    # -- rendering --------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        self._check_styles()
        # the size and scroll offset cannot change during one pass: work them out once
        self._pass = (self.size.width, *self.scroll_offset)
        try:
            return super().render_lines(crop)
        finally:
            self._pass = None

    def render_line(self, y: int) -> Strip:
        if self._pass is not None:
            width, scroll_x, scroll_y = self._pass
        else:
            if self._styles is None:
                self._check_styles()
            width = self.size.width
            scroll_x, scroll_y = self.scroll_offset
        if y == 0:
            return self._header_line(width, scroll_x)
        i = y - 1 + scroll_y
        if 0 <= i < len(self._order):
            return self._row_line(i, width, scroll_x)
        blank = self._blank
        if blank is None or blank[0] != (width, self._style_token):
            assert self._styles is not None
            blank = self._blank = ((width, self._style_token),
                                   Strip.blank(width, self._styles[0]))
        return blank[1]

    def _header_line(self, width: int, scroll_x: int) -> Strip:
        hover = self._show_hover and self._hover_row == -1
        sig = (width, scroll_x, self._style_token, hover)
        hit = self._header
        if hit is None or hit[0] != sig:
            labels = [c.label for c in self.columns.values()]
            hit = self._header = (sig, self._line(-1, labels, width, scroll_x, False, hover))
        return hit[1]

    def _row_line(self, i: int, width: int, scroll_x: int) -> Strip:
        """Row ``i``'s line: the cached one unless its place, the cursor or hover on it, the
        width or the styles changed (new cells drop it, see ``_paint_row``)."""
        key = self._order[i]
        cursor = i == self._cursor and self.show_cursor
        hover = self._show_hover and i == self._hover_row
        sig = (i, cursor, hover, width, scroll_x, self._style_token)
        hit = self._strips.get(key)
        if hit is None or hit[0] != sig:
            cells = self._cells_of(key)
            hit = self._strips[key] = (sig, self._line(i, cells, width, scroll_x, cursor, hover))
        return hit[1]

    def _line(self, row: int, cells: Sequence[Text], width: int, scroll_x: int, cursor: bool,
              hover: bool) -> Strip:
        """One line as DataTable draws it: each cell with its row/column meta, the cursor or
        hover style over the row's, then the rest of the width in the row's style."""
        assert self._styles is not None
        base = self._styles[0]
        styles = self._cell_styles
        row_style, comp, post = self._row_styles(row < 0, cursor, hover)
        console = self.app.console
        segments: list[Segment] = []
        for i, col in enumerate(self.columns.values()):
            cell = cells[i] if i < len(cells) else _EMPTY
            key = (row, i, cursor, hover)
            pre = styles.get(key)
            if pre is None:
                pre = styles[key] = row_style + Style.from_meta({"row": row, "column": i}) + comp
            segments.extend(self._cell_segments(console, cell, col.width, pre, post))
        key = (row, -1, cursor, hover)  # the rest of the width
        rest_style = styles.get(key)
        if rest_style is None:
            rest_style = styles[key] = row_style + comp + Style.from_meta(
                {"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, width - self._table_w), rest_style))
        if scroll_x == 0 and self._table_w <= width and segments[0].text:
            # exactly ``width`` cells, nothing to crop: one Strip instead of three
            return Strip(Segment.simplify(segments), width)
        return Strip(line_crop(segments, scroll_x, scroll_x + width, width)
                     ).adjust_cell_length(width, base).simplify()

    def _row_styles(self, header: bool, cursor: bool, hover: bool) -> tuple[Style, Style, Style]:
        """(row style, cursor/hover style over it, post style) as DataTable works them out
        (``_get_row_style``, ``_get_styles_to_render_cell``) for a row or the header."""
        key = (header, cursor, hover)
        hit = self._row_styles_cache.get(key)
        if hit is None:
            assert self._styles is not None
            base, header_style, cursor_style, hover_style, header_hover = self._styles
            comp = Style()
            if hover and self.show_cursor:
                comp += hover_style
                if header:
                    comp += header_hover
            if cursor and self.show_cursor:
                comp += cursor_style
            post = Style.from_color(color=comp.color) + Style.null()
            hit = self._row_styles_cache[key] = (header_style if header else base, comp, post)
        return hit

    def _cell_segments(self, console, value: Text, width: int, pre: Style,
                       post: Style) -> list[Segment]:
        """What DataTable draws for a cell: ``Styled(Padding(cell, 0), pre, post)`` on one
        line. A one-line Text that fits is drawn without the round trip through the console,
        and what it draws before ``pre``/``post`` is kept by its look (cells that show the
        same value, in any row, are not drawn again)."""
        look = (value.plain, value.style, value.justify, tuple(value.spans), width)
        key = (look, pre, post)
        segments = self._drawn.get(key)
        if segments is not None:
            return segments
        inner = self._inner.get(look)
        if inner is None:
            inner = self._inner_segments(console, value, width)
            if len(self._inner) >= 1024:
                self._inner.clear()
            self._inner[look] = inner
        if not inner:  # not such a cell: as DataTable does it
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            lines = console.render_lines(
                Styled(Padding(value, (0, 0)), pre_style=pre, post_style=post), options)
            return lines[0] if lines else [Segment(" " * width, pre)]
        segments = []
        add = segments.append
        for text, style in inner:  # Segment.apply_style(segs, pre, post)
            style = pre + style
            add(Segment(text, (style + post if style else post) if post else style))
        if len(self._drawn) >= 2048:
            self._drawn.clear()
        self._drawn[key] = segments
        return segments

    @staticmethod
    def _inner_segments(console, value: Text, width: int) -> list[tuple[str, Style | None]]:
        """A one-line Text that fits ``width``, justified and padded as Padding draws it:
        (text, style) pairs; [] when it is not such a Text."""
        n = value.cell_len
        justify = value.justify
        if n > width or "\n" in value.plain or justify not in (None, "default", "left", "right"):
            return []
        pad = width - n
        if not value.spans:  # Text.render's one segment, then the text's own style
            text = value.plain
            if justify == "right":  # as Lines.justify does it: rstrip, then pad left
                text = text.rstrip()
                text = " " * (width - cell_len(text)) + text
                pad = 0
            elif pad and justify == "left":
                text += " " * pad
                pad = 0
            own = console.get_style(value.style) if value.style else None
            inner: list[tuple[str, Style | None]] = [(text, own or None)]
        else:
            if justify == "right":
                value = value.copy()
                value.rstrip()
                value.pad_left(width - value.cell_len)
                pad = 0
            elif pad and justify == "left":
                value = value.copy()
                value.pad_right(pad)
                pad = 0
            segs = list(value.render(console))
            if value.style:  # Text.__rich_console__ turns the base style into a span
                segs = list(Segment.apply_style(segs, style=console.get_style(value.style)))
            inner = [(seg.text, seg.style) for seg in segs]
        if pad:  # Padding fills the rest of the cell with a plain segment
            inner.append((" " * pad, None))
        return inner

    def _refresh_row(self, row: int) -> None:
        """Repaint the line of row ``row`` (-1: the header) if it is in view."""
        width, height = self.size
        y = 0 if row < 0 else row + 1 - self.scroll_offset.y
        if (row < 0 or y >= 1) and y < height:
            self.refresh(Region(0, y, width, 1))

    # -- cursor, keys and mouse -------------------------------------------------------------
    @property
    def cursor_row(self) -> int:
        return self._cursor

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def row_keys(self) -> tuple[str, ...]:
        """The row keys in display order."""
        return tuple(self._order)

    def get_row_at(self, row_index: int) -> list[Text]:
        """The cells of the row at ``row_index`` (IndexError past the end)."""
        cells = self._cells_of(self._order[row_index])
        return [cells[i] if i < len(cells) else Text("") for i in range(len(self.columns))]

    def move_cursor(self, *, row: int | None = None, animate: bool = False,
                    scroll: bool = True) -> None:
        if row is not None:
            self._set_cursor(row, scroll=scroll, animate=animate)

    def _set_cursor(self, row: int, *, scroll: bool = True, animate: bool = False) -> None:
        n = len(self._order)
        row = min(max(row, 0), n - 1) if n else 0
        old, self._cursor = self._cursor, row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
        key = self._order[row] if n else None
        if key != self._announced:
            self._announced = key
            if key is not None:
                self.post_message(self.RowHighlighted(self, row, key))
        if scroll:
            self._scroll_cursor_into_view(animate)

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        """Scroll so that the cursor's row shows under the header (after the layout when
        the table's height is about to change)."""
        if self._size_pending or not self._order:
            return
        region = Region(self.scroll_offset.x, self._cursor + 1,
                        max(self.size.width, self._table_w), 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(1, 0, 0, 0), force=True)

    def _keys_move(self) -> None:
        """The keys hide the mouse hover (as in DataTable)."""
        self._set_hover(None)

    def action_cursor_up(self) -> None:
        self._keys_move()
        self._set_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._keys_move()
        self._set_cursor(self._cursor + 1)

    def action_cursor_first(self) -> None:
        self._keys_move()
        self._set_cursor(0)

    def action_cursor_last(self) -> None:
        self._keys_move()
        self._set_cursor(len(self._order) - 1)

    def action_page_down(self) -> None:
        self._keys_move()
        page = max(1, self.scrollable_content_region.height - 1)
        self.scroll_relative(y=page, animate=False, force=True)
        self._set_cursor(self._cursor + page)

    def action_page_up(self) -> None:
        self._keys_move()
        page = max(1, self.scrollable_content_region.height - 1)
        self.scroll_relative(y=-page, animate=False, force=True)
        self._set_cursor(self._cursor - page)

    def action_select_cursor(self) -> None:
        self._keys_move()
        key = self.selected_key
        if key is not None and self.show_cursor:
            self.post_message(self.RowSelected(self, self._cursor, key))

    def _set_hover(self, row: int | None) -> None:
        old = (self._show_hover, self._hover_row)
        self._show_hover = row is not None and self.show_cursor
        if row is not None:
            self._hover_row = row
        if (self._show_hover, self._hover_row) != old:
            self._refresh_row(old[1])
            self._refresh_row(self._hover_row)

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        self._set_hover(meta.get("row") if meta else None)

    def _on_leave(self, _: events.Leave) -> None:
        self._set_hover(None)

    async def _on_click(self, event: events.Click) -> None:
        """A click moves the cursor to the row; a click on the cursor's row selects it."""
        meta = event.style.meta
        row = meta.get("row") if meta else None
        if row is None or row < 0 or row >= len(self._order) or not self.show_cursor:
            return
        self._set_hover(row)
        again = row == self._cursor
        self._set_cursor(row, animate=True)
        if again:
            self.post_message(self.RowSelected(self, row, self._order[row]))
        event.stop()

    # -- rows and columns -------------------------------------------------------------------
    def _columns_changed(self) -> None:
        """New ``columns`` (or widths, labels): every line is drawn again."""
        self._table_w = sum(c.width for c in self.columns.values())
        self._strips.clear()
        self._header = None
        self._update_virtual_size()
        self.refresh()

    def _update_virtual_size(self) -> None:
        size = Size(self._table_w, len(self._order) + 1)
        if size != self.virtual_size:
            self.virtual_size = size
            if not self._size_pending and self.is_attached:
                self._size_pending = True
                self.call_after_refresh(self._laid_out)

    def _laid_out(self) -> None:
        self._size_pending = False
        self._scroll_cursor_into_view()

    def set_order(self, order: list[str]) -> None:
        """Show the rows ``order`` (keys) in that order: rows that stay keep their cells; the
        cursor stays on its row key (the first row when that row is gone)."""
        cursor_key = self.selected_key
        keep = set(order)
        for cache in (self._cells, self._strips, self._later):
            for k in [k for k in cache if k not in keep]:
                del cache[k]
        self._order = order
        self._index = {k: i for i, k in enumerate(order)}
        self._update_virtual_size()
        self.refresh()
        self._set_cursor(self._index.get(cursor_key, 0) if cursor_key is not None else 0)

    def set_cells_later(self, key: str, make: Callable[[], list[Text]]) -> None:
        """Row ``key`` has new cells, made by ``make()`` when the row is first drawn or read:
        a fleet table of hundreds of rows builds cells for the rows in view only."""
        self._later[key] = make
        self._strips.pop(key, None)
        index = self._index.get(key)
        if index is not None:
            self._refresh_row(index)

    def _cells_of(self, key: str) -> Sequence[Text]:
        make = self._later.pop(key, None)
        if make is not None:
            self._cells[key] = make()
        return self._cells.get(key, ())

    def set_cells(self, key: str, cells: list[Text]) -> None:
        """The cells of row ``key`` (one per column); when any differs from what is drawn,
        that line only is drawn again."""
        self._later.pop(key, None)
        old = self._cells.get(key)
        if old is not None and same_cells(old, cells):
            return
        self._cells[key] = cells
        self._strips.pop(key, None)
        index = self._index.get(key)
        if index is not None:
            self._refresh_row(index)

    @property
    def selected_key(self) -> str | None:
        if 0 <= self._cursor < len(self._order):
            return self._order[self._cursor]
        return None
