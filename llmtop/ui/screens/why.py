"""Why (``w``): every engine's findings, root cause first, with their evidence and action.

Reads the findings the app keeps (``app.diagnosis``: the store's live diagnosis, see
``llmtop/diagnose``); readable at 80x24 (wrapped text, scrollable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import BASELINE_KEEP_S, DIAG_WINDOW_S
from llmtop.ui.widgets.footer import FitFooter
from llmtop.units import DASH, pct, secs_fine
from llmtop.verdict import short_target

__all__ = ["SEVERITY_STYLE", "WhyScreen", "diagnosis_window_s", "fmt_evidence", "why_renderable"]

SEVERITY_STYLE = {"critical": "bold red", "warn": "bold yellow", "info": "cyan"}

_PCT = ("kv", "hit_rate", "spec_accept", "share", "error_share", "abort_share")
_TOKENS = ("prompt_p50", "prompt_p90", "iter_p50", "slowest_prompt_min", "slowest_prompt_max",
           "window_prompt_median")
_SECONDS = ("longest_queue_s",)
"""Evidence of single requests (``diagnose.request_citations``) in seconds."""


def _val(name: str, v: float | str | None) -> str:
    if v is None:
        return DASH
    if isinstance(v, str):
        return v
    base = name.rsplit(".", 1)[-1]
    if base in _PCT or "_share_of_" in base:  # queue_share_of_ttft, queue_share_of_e2e
        return pct(v)
    if base in _TOKENS:
        return f"{v:.0f} tok"
    if base.endswith(("_p50", "_p95", "_mean")) or base in _SECONDS:
        return secs_fine(v)
    if abs(v) >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.2g}"


def fmt_evidence(e: Evidence) -> str:
    """``kv 97% (usual 45%, limit 95%) 30s``."""
    extra = []
    if e.baseline is not None:
        extra.append(f"usual {_val(e.signal, e.baseline)}")
    if e.threshold is not None:
        extra.append(f"limit {_val(e.signal, e.threshold)}")
    tail = f" ({', '.join(extra)})" if extra else ""
    return f"{e.signal} {_val(e.signal, e.value)}{tail} [{e.window}]"


def diagnosis_window_s(view: Any) -> float:
    """The window the findings were judged over: the fleet's rate window in fleet mode (its
    monitor's diagnosis says), else ``DIAG_WINDOW_S``."""
    mon = getattr(getattr(view, "source", None), "monitor", None)
    w = getattr(getattr(mon, "diagnoser", None), "window_s", None)
    return float(w) if isinstance(w, int | float) and w > 0 else DIAG_WINDOW_S


def why_renderable(findings: Sequence[Finding], *, baseline_note: str = "",
                   window_s: float = DIAG_WINDOW_S) -> Group:
    """The findings grouped by engine, as Rich text (also used by tests)."""
    parts: list[Any] = [Text(
        f"Findings over the last {window_s:.0f} s, each engine against its own median "
        f"over {BASELINE_KEEP_S / 60:.0f} min{baseline_note}. Root cause first.", style="dim")]
    if not findings:
        parts.append(Text(""))
        parts.append(Text("No findings: every engine looks as usual, or has too little "
                          "traffic in the window to judge.", style="green"))
        return Group(*parts)
    current = None
    grid: Table | None = None
    for f in findings:
        if f.target != current:
            current = f.target
            parts.append(Text(""))
            head = Text(short_target(f.target), style="bold")
            if f.model:
                head.append(f"  {f.model}", style="dim")
            parts.append(head)
            # a hanging indent: wrapped lines stay under their finding
            grid = Table.grid(padding=(0, 1))
            grid.add_column(width=9, no_wrap=True)
            grid.add_column(ratio=1)
            parts.append(grid)
        assert grid is not None
        sev = Text(f" {f.severity.upper()}", style=SEVERITY_STYLE.get(f.severity, ""))
        grid.add_row(sev, Text.assemble((f.rule, "bold"), f"  {f.summary}"))
        if f.explains:  # the header names this cause and the worst of these
            grid.add_row("", Text("cause of: " + ", ".join(f.explains), style="bold"))
        ev = [fmt_evidence(e) for e in f.evidence if e.value is not None]
        if ev:
            grid.add_row("", Text("evidence: " + " \u00b7 ".join(ev), style="dim"))
        if f.action:
            grid.add_row("", Text(f"\u2192 {f.action}", style="italic"))
    return Group(*parts)


class WhyScreen(Screen):
    """The findings of every engine (``view.diagnosis``), refreshed with each paint."""

    BINDINGS = [
        Binding("escape", "back", "Back", id="why_back"),
        Binding("w", "back", "Back", show=False, id="why_back_w"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="why_down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="why_up"),
    ]

    def __init__(self, view: Any) -> None:
        super().__init__()
        self.view = view
        self._shown: tuple[Finding, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static("Why: findings, evidence and actions", classes="title")
        with VerticalScroll(classes="detail-body"):
            yield Static(id="why-body")
        yield FitFooter()

    def on_mount(self) -> None:
        self.refresh_data(force=True)
        self.query_one(VerticalScroll).focus()

    def refresh_data(self, *, force: bool = False) -> None:
        findings = tuple(self.view.diagnosis)
        if not force and findings == self._shown:
            return
        self._shown = findings
        note = " (in replay after a seek: the 5 min before it)" if getattr(
            self.view, "replay", None) is not None else ""
        self.query_one("#why-body", Static).update(why_renderable(
            findings, baseline_note=note, window_s=diagnosis_window_s(self.view)))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_scroll(self, n: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=n, animate=False)
