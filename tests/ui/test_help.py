"""Help is generated from BINDINGS: it lists every key and scrolls at 80x24."""

from __future__ import annotations

from textual.binding import Binding

from llmtop.ui.app import LlmtopApp
from llmtop.ui.screens.help import SECTION_OPENERS, HelpScreen, binding_sections

from .conftest import first_paint, make_app


def test_every_app_binding_is_in_a_section():
    listed = {b.id for _, bs in binding_sections(LlmtopApp.BINDINGS) for b in bs}
    for b in LlmtopApp.BINDINGS:
        assert b.id in listed, b


def test_the_engines_table_keys_are_listed():
    from llmtop.ui.widgets.rowtable import RowTable

    sections = dict(binding_sections(LlmtopApp.BINDINGS))
    (title,) = [t for t in sections if t.startswith("Engines table")]
    actions = {b.action for b in sections[title]}
    want = {b.action for b in Binding.make_bindings(RowTable.BINDINGS)} - {"select_cursor"}
    assert actions == want and "cursor_last" in actions


async def test_help_lists_every_live_binding_and_scrolls():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        plain = app.screen.plain_text()
        for title, bindings in binding_sections(LlmtopApp.BINDINGS):
            opener = SECTION_OPENERS.get(title)
            if opener is not None and not app.mode_allows(opener):
                continue  # a screen this mode never opens (no log followed: the log view)
            for b in bindings:  # every key that works live (mode_keys: the others)
                if app.mode_allows(b.action):
                    assert b.description in plain, b
        scroller = app.screen.query_one("#help-box")
        assert scroller.max_scroll_y > 0
        await pilot.press("j", "j", "j")
        await pilot.pause()
        assert scroller.scroll_y > 0
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
