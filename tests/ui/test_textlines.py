"""TextLines: no-wrap Text drawn line by line, each line's strip kept until it changes."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region

from llmtop.ui.widgets.textlines import TextLines, same


class _App(App):
    CSS = "TextLines { width: 20; height: 3; }"

    def compose(self) -> ComposeResult:
        yield TextLines()


def _plain(strip) -> str:
    return "".join(seg.text for seg in strip)


async def test_lines_are_cut_to_the_width_the_text_asks():
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        w.set_text(Text("a" * 30 + "\nshort", no_wrap=True, overflow="ellipsis"))
        await pilot.pause()
        assert _plain(w.render_line(0)) == "a" * 19 + "\u2026"
        assert _plain(w.render_line(1)) == "short".ljust(20)
        assert _plain(w.render_line(2)) == " " * 20  # past the text: blank, full width


async def test_a_base_style_without_spans_is_drawn():
    """Text.render leaves a span-less Text's base style out; the widget must not."""
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        w.set_text(Text("GPU unavailable", style="dim"))
        await pilot.pause()
        assert all(seg.style is not None and seg.style.dim
                   for seg in w.render_line(0) if seg.text.strip())


async def test_unchanged_lines_keep_their_strip_and_changed_ones_are_redrawn():
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        w.set_text(Text("header\nvalue 1"))
        await pilot.pause()
        first = [w.render_line(0), w.render_line(1)]
        w.set_text(Text("header\nvalue 2"))
        await pilot.pause()
        assert w.render_line(0) is first[0]
        assert w.render_line(1) is not first[1]
        assert _plain(w.render_line(1)).rstrip() == "value 2"


async def test_a_new_base_style_alone_is_a_change():
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        w.set_text(Text("same words"))
        await pilot.pause()
        w.set_text(Text("same words", style="bold"))
        await pilot.pause()
        assert next(iter(w.render_line(0))).style.bold
        assert not same(Text("x"), Text("x", style="bold"))
        assert same(Text("x", style="bold"), Text("x", style="bold"))


async def test_build_follows_the_size():
    class Sized(TextLines):
        def build(self, width: int, height: int) -> Text:
            return Text(f"{width}x{height}")

    class SizedApp(App):
        CSS = "Sized { width: 12; height: 2; }"

        def compose(self) -> ComposeResult:
            yield Sized()

    app = SizedApp()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(Sized)
        await pilot.pause()
        assert _plain(w.render_line(0)).rstrip() == "12x2"
        assert str(w.render()) == "12x2"


async def test_a_change_repaints_only_the_lines_that_differ():
    """Same size, on screen: the new Text is split at once, only changed lines are marked
    dirty (an identical Text marks none), and the screen still shows every change."""
    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        w.set_text(Text("header\nvalue 1\nfooter"))
        await pilot.pause()
        w.render_lines(w.size.region)  # drawn once at this size
        asked: list[tuple] = []
        original = w.refresh
        w.refresh = lambda *regions, **kw: asked.append(regions) or original(*regions, **kw)
        w.set_text(Text("header\nvalue 2\nfooter"))
        assert asked == [(Region(0, 1, 20, 1),)]
        w.set_text(Text("header\nvalue 2\nfooter", style="bold"))  # every line's look
        assert asked[-1] == tuple(Region(0, y, 20, 1) for y in range(3))
        w.set_text(Text("header\nvalue 3\nfooter", style="bold"))
        await pilot.pause()
        screen = [_plain(s)[:20].rstrip() for s in app.screen._compositor.render_strips()]
        assert screen[:3] == ["header", "value 3", "footer"]
        asked.clear()
        w.set_text(Text("header\nvalue 3\nfooter", style="bold"))
        assert asked == []


async def test_a_line_is_drawn_as_crop_extend_and_apply_style_would_draw_it():
    """One Strip per line (not three): the same segments as Textual's own steps, for short,
    exact, cut, styled and wide-character lines."""
    from textual.strip import Strip

    app = _App()
    async with app.run_test(size=(40, 10)) as pilot:
        w = app.query_one(TextLines)
        for text in (Text("short"), Text("x" * 20), Text("y" * 30, overflow="ellipsis"),
                     Text.assemble(("bold", "bold"), " plain ", ("red", "red")),
                     Text("dim only", style="dim"), Text("漢字" * 12, overflow="crop")):
            w.set_text(text)
            await pilot.pause()
            style = w.rich_style
            got = w.render_line(0)
            cut = text.copy()
            if cut.cell_len > 20:
                cut.truncate(20, overflow=text.overflow or "crop")
            if cut.style and not cut.spans:
                cut.stylize(cut.style)
            want = Strip(cut.render(app.console)).crop_extend(0, 20, None).apply_style(style)
            assert list(got) == list(want) and got.cell_length == 20, text.plain
