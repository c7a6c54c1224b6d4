"""Plain-text screenshots: the current screen as the lines a terminal of the app's size
shows (tests, docs; ``App.export_screenshot`` is the SVG form)."""

from __future__ import annotations

import io

from rich.console import Console
from textual.app import App

__all__ = ["screen_lines"]


def screen_lines(app: App) -> list[str]:
    """The whole current screen (modal backgrounds included) as plain text lines."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text().splitlines()
