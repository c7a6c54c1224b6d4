"""The engines table on the line API: one cached line per row, redrawn only when that row,
the cursor on it, the width or the styles change; keys, mouse and scrolling."""

from __future__ import annotations

from dataclasses import replace

from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.widgets.engines import EnginesTable

from .conftest import first_paint, make_app


def _table(app) -> EnginesTable:
    return app.screen.query_one(EnginesTable)


def _lines(table: EnginesTable) -> list:
    return [table.render_line(y) for y in range(table.size.height)]


def _crowded(n: int) -> FakeSource:
    """``n`` SGLang rows (ports 30000..), each running ``i`` requests."""
    base = demo_snapshot("ok")
    sg = next(r for r in base.engines if r.target.startswith("sglang"))
    rows = [replace(sg, target=f"sglang@127.0.0.1:{30000 + i}",
                    key=f"sglang@127.0.0.1:{30000 + i}|{sg.model}", running=i)
            for i in range(n)]
    return FakeSource(replace(base, engines=rows))


async def _tick(app, pilot) -> None:
    await app.poll_once()
    await pilot.pause()
    app.paint()
    await pilot.pause()


async def test_only_the_changed_row_is_drawn_again():
    base = demo_snapshot("ok")
    vllm = next(i for i, r in enumerate(base.engines) if r.target.startswith("vllm"))

    def snap(n: int):
        if n == 0:
            return base
        engines = list(base.engines)
        engines[vllm] = replace(engines[vllm], running=(engines[vllm].running or 0) + n)
        return replace(base, engines=engines)

    app = make_app(source=FakeSource(snapshots=snap))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        before = _lines(table)
        row = 1 + table.row_keys.index(base.engines[vllm].key)
        await _tick(app, pilot)
        after = _lines(table)
        assert before[row].text != after[row].text and "26/256" in after[row].text
        assert all(a is b for y, (a, b) in enumerate(zip(before, after, strict=True)) if y != row)
        await _tick(app, pilot)  # the same cells again: nothing new is made
        again = _lines(table)
        assert again[row].text != after[row].text
        assert all(a is b for y, (a, b) in enumerate(zip(after, again, strict=True)) if y != row)


async def test_cursor_and_focus_change_the_line_styles_not_the_text():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        focused = _lines(table)
        await pilot.press("down")
        moved = _lines(table)
        assert [s.text for s in moved] == [s.text for s in focused]
        assert moved[1] != focused[1] and moved[2] != focused[2]  # the cursor left/arrived
        assert moved[0] is focused[0] and moved[3] is focused[3]
        app.set_focus(None)
        await pilot.pause()
        blurred = _lines(table)
        assert blurred[2] != moved[2]  # the blurred cursor, the table without the focus tint
        table.focus()
        await pilot.pause()
        assert _lines(table) == moved


async def test_keys_move_the_cursor_and_keep_it_in_view():
    app = make_app(source=_crowded(20))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        rows = table.size.height - 1  # under the header
        assert table.row_count == 20 and rows < 20
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 19 and table.scroll_y == 20 - rows
        assert table.selected_key.startswith("sglang@127.0.0.1:30019")
        await pilot.press("home")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert table.cursor_row == rows and table.cursor_row - table.scroll_y < rows
        await pilot.press("pageup")
        await pilot.pause()
        assert table.cursor_row == 0 and table.scroll_y == 0
        for _ in range(rows + 2):
            await pilot.press("down")
        await pilot.pause()
        assert table.cursor_row == rows + 2 and table.scroll_y == 3
        lines = _lines(table)
        assert lines[0].text.startswith(" ENGINE")  # the header stays on top
        assert lines[-1].text.startswith(f" sglang :{30000 + rows + 2}")


async def test_the_cursor_follows_its_row_through_a_sort_and_a_filter():
    app = make_app(source=_crowded(12))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        await pilot.press("down", "down", "down")
        key = table.selected_key
        await pilot.press("s", "s")  # run: most running first
        await pilot.pause()
        assert app.state.sort_column == "run"
        assert table.selected_key == key and table.cursor_row == 12 - 1 - 3
        await pilot.press("slash", "3", "0", "0", "0", "enter")
        await pilot.pause()
        assert table.row_count == 10 and all(":3000" in k for k in table.row_keys)
        assert table.selected_key == key
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 12 and table.selected_key == key


async def test_a_click_moves_the_cursor_and_a_second_click_opens_the_detail():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        key = table.row_keys[2]
        await pilot.click(EnginesTable, offset=(5, 3))
        await pilot.pause()
        assert table.selected_key == key and isinstance(app.screen, OverviewScreen)
        await pilot.click(EnginesTable, offset=(5, 3))
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen) and app.screen.key == key


async def test_rows_out_of_view_get_their_cells_only_when_scrolled_to():
    """A fleet table of hundreds of rows: each refresh builds the cells of the rows in
    view only; a row scrolled to is built then, with its latest values."""
    app = make_app(source=_crowded(120))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        table = _table(app)
        _lines(table)
        keys = table.row_keys
        assert len(keys) == 120
        waiting = set(table._later)
        assert keys[0] not in waiting and keys[-1] in waiting  # in view: built, last: not
        assert len(waiting) >= 120 - table.size.height
        cells = table.get_row_at(len(keys) - 1)  # read: built now, from its row
        assert keys[-1] not in table._later
        assert any(c.plain.strip() for c in cells)
        await pilot.press("end")
        await pilot.pause()
        _lines(table)
        top = table.scroll_offset.y
        in_view = keys[top:top + table.size.height - 1]  # the header takes a line
        assert top > 0 and keys[-2] in in_view
        assert not set(in_view) & set(table._later)  # drawn rows have their cells
