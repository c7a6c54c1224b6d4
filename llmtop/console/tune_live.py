"""The live progress of ``llmtop tune`` on a terminal (rich, redrawn in place on stderr):
trial k of n, the level being measured, the best so far and the time left in the budget;
the per-level lines scroll above it. On a pipe the CLI prints one line a step instead."""

from __future__ import annotations

import io
import time
from types import TracebackType
from typing import IO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from llmtop.tune.progress import TuneProgress

__all__ = ["LiveTune", "panel_text", "progress_lines", "progress_panel"]


def _dur(sec: float) -> str:
    s = round(sec)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def progress_lines(p: TuneProgress, now: float | None = None) -> list[str]:
    """The panel's lines as text (what the view shows; tested without a terminal)."""
    out = [f"trial {p.started} of {p.total} started; {p.done} finished, {p.skipped} skipped"]
    for name, level in p.running.items():
        out.append(f"running {name}: " + (f"measuring {level}" if level else "starting"))
    if not p.running:
        out.append("no trial running")
    out.append(f"best so far: {p.best or 'none yet'}")
    left = p.budget_left(now)
    out.append("budget: none" if left is None else f"time left in the budget: {_dur(left)}")
    if p.last:
        out.append(f"last level: {p.last}")
    return out


def progress_panel(p: TuneProgress, now: float | None = None) -> Panel:
    """The panel redrawn on the terminal."""
    return Panel(Group(*(Text(line) for line in progress_lines(p, now))),
                 title="llmtop tune", title_align="left")


def panel_text(p: TuneProgress, now: float | None = None, width: int = 100) -> str:
    """The panel as plain text, as a terminal ``width`` wide would show it."""
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(progress_panel(p, now))
    return buf.getvalue()


class LiveTune:
    """A redrawn panel on ``file`` (stderr); ``say`` prints a line above it."""

    def __init__(self, progress: TuneProgress, file: IO[str] | None = None) -> None:
        self.progress = progress
        self.console = Console(file=file, stderr=file is None, highlight=False)
        self.live = Live(get_renderable=lambda: progress_panel(progress, time.monotonic()),
                         console=self.console, refresh_per_second=2, transient=True)

    def say(self, text: str) -> None:
        self.live.console.print(f"llmtop tune: {text}", soft_wrap=True, markup=False)

    def __enter__(self) -> LiveTune:
        self.live.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.live.__exit__(et, ev, tb)
