"""Help (generated from every screen's BINDINGS, so it cannot drift) and the replay seek box."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from llmtop.ui.replay_bindings import REPLAY_ACTIONS

__all__ = ["LOG_SECTION", "SECTION_OPENERS", "HelpScreen", "SeekScreen", "binding_sections"]


def binding_sections(app_bindings: Sequence[BindingType]) -> list[tuple[str, list[Binding]]]:
    """(section title, bindings) for the app (``app_bindings``) and each screen, in help
    order."""
    from llmtop.ui.screens.detail import EngineDetailScreen
    from llmtop.ui.screens.gpu import GpuScreen
    from llmtop.ui.screens.logs import LogScreen
    from llmtop.ui.screens.overview import OverviewScreen
    from llmtop.ui.screens.probe import ProbeScreen
    from llmtop.ui.screens.raw import RawMetricsScreen
    from llmtop.ui.screens.requests import RequestsScreen
    from llmtop.ui.screens.why import WhyScreen
    from llmtop.ui.widgets.rowtable import RowTable

    app_b = list(Binding.make_bindings(app_bindings))
    replay = [b for b in app_b if b.action.split("(")[0] in REPLAY_ACTIONS]
    general = [b for b in app_b if b not in replay]
    return [
        ("Everywhere", general),
        ("Overview", list(Binding.make_bindings(OverviewScreen.BINDINGS))),
        ("Engines table (Enter: details, as above)",
         [b for b in Binding.make_bindings(RowTable.BINDINGS) if b.action != "select_cursor"]),
        ("Engine detail", list(Binding.make_bindings(EngineDetailScreen.BINDINGS))),
        ("Raw metrics", list(Binding.make_bindings(RawMetricsScreen.BINDINGS))),
        ("GPUs (up/down selects a GPU)", list(Binding.make_bindings(GpuScreen.BINDINGS))),
        ("Load probe", list(Binding.make_bindings(ProbeScreen.BINDINGS))),
        ("Requests (r: the window's requests, slowest first; up/down selects one)",
         list(Binding.make_bindings(RequestsScreen.BINDINGS))),
        (LOG_SECTION, list(Binding.make_bindings(LogScreen.BINDINGS))),
        ("Why (findings: cause, evidence, action)",
         list(Binding.make_bindings(WhyScreen.BINDINGS))),
        ("Replay only (llmtop replay FILE; p/space play/pause)", replay),
        ("Help", list(Binding.make_bindings(HelpScreen.BINDINGS))),
    ]


LOG_SECTION = "Log (L on an engine or a request; up/down, PgUp/PgDn scroll)"

SECTION_OPENERS = {"Load probe": "probe", "Raw metrics": "raw", LOG_SECTION: "logs"}
"""Help section -> the action that opens its screen (left out where the mode refuses it)."""


class HelpScreen(ModalScreen[None]):
    """Every key that works in this mode, scrollable at 80x24: the app's ``app_bindings``,
    then each screen's."""

    BINDINGS = [
        Binding("escape", "close", "Close", id="help_close"),
        Binding("question_mark", "close", "Close", key_display="?", show=False,
                id="help_close_q"),
        Binding("q", "close", "Close", show=False, id="help_close_quit"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="help_down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="help_up"),
    ]

    def __init__(self, app_bindings: Sequence[BindingType]) -> None:
        super().__init__()
        self.app_bindings = list(app_bindings)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(self.help_table(), id="help-text")

    def help_table(self) -> Table:
        t = Table.grid(padding=(0, 2))
        t.add_column(justify="right", min_width=10, no_wrap=True)
        t.add_column()
        t.add_row(Text("llmtop", style="bold"), Text("htop for LLM inference servers. "
                  "\u2013 = the engine does not report it (never shown as 0). Esc goes back."))
        allows = getattr(self.app, "mode_allows", None)
        for title, listed in binding_sections(self.app_bindings):
            opener = SECTION_OPENERS.get(title)
            if allows is not None and opener is not None and not allows(opener):
                continue  # a screen this mode never opens
            # only the keys that work in this mode (the footer's rule too)
            bindings = [b for b in listed if allows is None or allows(b.action)]
            if not bindings:
                continue
            t.add_row("", "")
            t.add_row("", Text(title, style="bold underline"))
            for b in bindings:
                keys = b.key_display or self.app.get_key_display(b)
                desc = b.description + (f": {b.tooltip}" if b.tooltip else "")
                t.add_row(Text(keys, style="bold"), desc)
        return t

    def plain_text(self, width: int = 70) -> str:
        """The help as plain text (tests, docs)."""
        con = Console(width=width, record=True, file=io.StringIO())
        con.print(self.help_table())
        return con.export_text()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll(self, n: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=n, animate=False)

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()


class SeekScreen(ModalScreen[str | None]):
    """Replay: type a time (``HH:MM[:SS]``) or an offset (``+5m``, ``-90s``)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="seek_cancel")]

    SEEK_PROMPT = "Seek to HH:MM[:SS] or an offset (+5m, -90s); Enter to go"
    TRAVEL_PROMPT = ("Time travel to HH:MM[:SS], an offset (-2h), a date (RFC 3339) or now; "
                     "Enter to go")

    def __init__(self, prompt: str | None = None) -> None:
        super().__init__()
        self.prompt = prompt or self.SEEK_PROMPT

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="seek-box"):
            yield Label(self.prompt, id="seek-prompt")  # wraps (tcss): never cut
            yield Input(placeholder="03:12 or -10m", id="seek-input")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
