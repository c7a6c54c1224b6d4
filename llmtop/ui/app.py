"""The llmtop Textual app: bindings, the poll worker and screen wiring only.

One async worker (group ``poll``) ticks the source, then sleeps the rest of the interval;
it hands each result to ``take_snapshot`` (on the app's loop; ``SnapshotReady`` messages
still work) and screens are painted at most ``PAINT_MIN_S`` apart.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App
from textual.binding import Binding

from llmtop.config import Config, Thresholds
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.live import findings_of
from llmtop.model import Snapshot
from llmtop.ui import fmt
from llmtop.ui.messages import PollFailed, SnapshotReady
from llmtop.ui.replay_keys import REPLAY_ACTIONS, REPLAY_BINDINGS, ReplayActions
from llmtop.ui.screens.logs import has_logs
from llmtop.ui.screens.overview import OverviewScreen
from llmtop.ui.source import Source, replay_control
from llmtop.ui.state import ViewState, next_interval
from llmtop.ui.themes import DEFAULT_THEME, GAUGE_DEFAULTS, load_themes
from llmtop.ui.widgets.scrollbar import use_whole_cell_scrollbars
from llmtop.verdict import Verdict, compute_verdict, growth_per_min, growth_points

__all__ = ["PAINT_MIN_S", "REPLAY_ACTIONS", "LlmtopApp", "Wake", "freeze_startup_objects",
           "run_fleet", "run_source", "run_tui"]

PAINT_MIN_S = 0.5
"""Paint slow: at most two repaints a second, however fast the source ticks."""

VERDICT_LOG_S = 30.0
"""An improving verdict is logged at most this often (a worse one at once)."""

FREEZE_AFTER_TICKS = 3
"""After this many polls start-up is over: ``freeze_startup_objects`` runs once."""

GC_THRESHOLDS = (20_000, 20, 10)
"""Cyclic-GC thresholds once start-up is over (Python's default: 700, 10, 10). Each tick
allocates thousands of short-lived containers (samples, rows, strips) that reference
counting frees; at 700 the collector ran 3 times a second and cost more CPU than the
engines table. Little of what we make is cyclic garbage, so collecting rarely keeps memory
the same (``benchmarks/tui_cost.py`` RSS)."""

_OPENS = {"probe": "ProbeScreen", "gpus": "GpuScreen", "requests": "RequestsScreen"}
"""Action -> the screen it opens (and that screen's footer does not offer it again)."""


class Wake:
    """What the poller sleeps on between ticks: ``set()`` ends the sleep at once. One timer
    and one future: ``asyncio.wait_for(event.wait(), t)`` made a task, a timer and three
    loop wake-ups every tick."""

    def __init__(self) -> None:
        self._set = False
        self._fut: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        if self._fut is not None and not self._fut.done():
            self._fut.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def sleep(self, timeout: float) -> None:
        """Until ``set()`` or ``timeout`` seconds, whichever comes first."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        fut = self._fut = loop.create_future()
        timer = loop.call_later(timeout, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._fut = None


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class LlmtopApp(ReplayActions, App):
    """htop for LLM inference servers."""

    CSS_PATH = str(Path(__file__).with_name("llmtop.tcss"))
    TITLE = "llmtop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="quit_ctrl_c"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("w", "why", "Why", tooltip="findings: the cause, its evidence, the action",
                id="why"),
        Binding("p", "pause", "Pause", show=False, id="pause"),  # footer room for w at 80x24
        Binding("space", "pause", "Pause", show=False, id="pause_space"),
        Binding("plus", "interval(1)", "Slower", key_display="+", show=False, id="slower"),
        Binding("minus", "interval(-1)", "Faster", key_display="-", show=False, id="faster"),
        Binding("R", "refresh_now", "Refresh", show=False, id="refresh"),
        Binding("r", "requests", "Requests", tooltip="the window's requests, slowest first, "
                "and where each spent its time", id="requests"),
        Binding("g", "gpus", "GPUs", id="gpus"),
        Binding("l", "probe", "Probe", id="probe"),
        Binding("t", "cycle_theme", "Theme", show=False, id="theme"),
        Binding("T", "fleet_travel", "Time travel", show=False, id="travel",
                tooltip="fleet mode: evaluate at another time (03:12, -2h, now)"),
        Binding("ctrl+s", "screenshot", "Screenshot", show=False, id="screenshot"),
        *REPLAY_BINDINGS,
    ]

    def __init__(self, source: Source, config: Config | None = None, *, autopoll: bool = True,
                 clock: Callable[[], float] = time.time, theme: str | None = None) -> None:
        super().__init__()
        use_whole_cell_scrollbars()
        self.source = source
        self.config = config or Config()
        self.thresholds: Thresholds = self.config.thresholds
        self.state = ViewState(interval_s=self.config.interval_s)
        self.autopoll = autopoll
        self.clock = clock
        self.snapshot: Snapshot | None = None
        self.verdict: Verdict = compute_verdict(None)
        self.diagnosis: list[Finding] = []
        """The source's current findings (``llmtop/diagnose``), root cause first."""
        self.replay = replay_control(source)
        self.first_data_at: float | None = None
        self._wake = Wake()
        self._last_paint = 0.0
        self._paint_pending = False
        self._last_verdict: int | None = None
        self._verdict_logged = 0.0
        themes, self.theme_errors = load_themes()
        for th in themes:
            self.register_theme(th)
        self.theme_names = [th.name for th in themes]
        want = theme or ("mono" if "NO_COLOR" in os.environ else self.config.theme)
        self.theme = want if want in self.theme_names else DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(GAUGE_DEFAULTS)

    def get_driver_class(self) -> Any:
        """On Linux and macOS terminals, ``CalmLinuxDriver`` (an input thread that does not
        wake 10 times a second); Textual's own choice elsewhere or when TEXTUAL_DRIVER is set."""
        if sys.platform == "win32" or os.environ.get("TEXTUAL_DRIVER"):
            return super().get_driver_class()
        from llmtop.ui.driver import CalmLinuxDriver

        return CalmLinuxDriver

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._theme_changed(None)
        for line in self.theme_errors:
            self.source.event("warn", None, line)
        self.push_screen(OverviewScreen(self))
        if self.autopoll:
            self._poll_loop()

    # -- polling ------------------------------------------------------------------------------
    @work(group="poll", exclusive=True, exit_on_error=False)
    async def _poll_loop(self) -> None:
        ticks = 0
        while True:
            started = time.monotonic()
            await self.poll_once()
            ticks += 1
            if ticks == FREEZE_AFTER_TICKS:
                freeze_startup_objects()
            self._wake.clear()
            await self._wake.sleep(max(0.0, self.state.interval_s - (time.monotonic() - started)))

    async def poll_once(self) -> None:
        """One tick; an exception becomes an event-log line and polling carries on."""
        try:
            snap = await self.source.tick()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the poller must survive anything
            self.post_message(PollFailed(f"poller: {type(exc).__name__}: {exc}"))
            return
        # taken here, on the app's loop, not through the app's message queue: one wake-up
        # and one dispatch less each tick
        try:
            self.take_snapshot(snap)
        except Exception as exc:  # a bad value must not stop the poller
            self.post_message(PollFailed(f"paint: {type(exc).__name__}: {exc}"))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        self.take_snapshot(message.snapshot)

    def take_snapshot(self, snap: Snapshot) -> None:
        """Show ``snap``: the verdict now, the screens at the next paint slot."""
        logs_before = has_logs(self.snapshot)
        self.snapshot = snap
        if has_logs(snap) != logs_before:  # L offered from now on (or no longer)
            self.refresh_bindings()
        self._update_verdict()
        if self.state.paused and self.first_data_at is not None:
            return
        self.request_paint()

    def on_poll_failed(self, message: PollFailed) -> None:
        try:
            self.source.event("error", None, message.text)
        except Exception:
            pass
        self.request_paint()

    def request_paint(self, *, force: bool = False) -> None:
        wait = PAINT_MIN_S - (time.monotonic() - self._last_paint)
        if force or wait <= 0:
            self.paint()
        elif not self._paint_pending:
            self._paint_pending = True
            self.set_timer(wait, self.paint)

    def paint(self) -> None:
        self._paint_pending = False
        self._last_paint = time.monotonic()
        for screen in self._mounted_screens():
            fn = getattr(screen, "refresh_data", None)
            if fn is not None and (screen is self.screen or isinstance(screen, OverviewScreen)):
                try:
                    fn()
                except Exception as exc:  # a bad value must not kill the screen
                    self.source.event("error", None, f"paint: {type(exc).__name__}: {exc}")
        if self.first_data_at is None and self.snapshot is not None:
            self.first_data_at = time.monotonic()

    def _mounted_screens(self) -> list[Any]:
        """The stacked screens that can be painted: a screen pushed but not yet mounted
        has not composed its widgets (a replay's first tick comes before that) and paints
        itself from ``on_mount``."""
        return [s for s in self.screen_stack if s.is_mounted]

    def _update_verdict(self) -> None:
        snap = self.snapshot
        iv, rows = self.state.interval_s, (snap.engines if snap else [])
        n = growth_points(iv)
        pairs = ((r.key, growth_per_min(self.source.series(r.key, "waiting", n), iv))
                 for r in rows)
        growth = {k: g for k, g in pairs if g is not None}
        # a direct source's store, else its monitor (fleet mode diagnoses its refreshes)
        self.diagnosis = (findings_of(getattr(self.source, "store", None))
                          or findings_of(getattr(self.source, "monitor", None)))
        problem = getattr(self.source, "problem", None)
        self.verdict = compute_verdict(snap, self.thresholds, waiting_growth=growth,
                                       diagnosis=self.diagnosis,
                                       source_problem=problem() if problem else None)
        # log a worse level at once, a better one at most every VERDICT_LOG_S (no flapping)
        level, last = self.verdict.level, self._last_verdict
        if snap is not None and level != last:
            now = time.monotonic()
            if last is None:
                self._last_verdict = level
            elif level > last or now - self._verdict_logged >= VERDICT_LOG_S:
                name = ("info", "warn", "error")[level]
                self.source.event(name, None, f"verdict: {self.verdict.text}")
                self._last_verdict, self._verdict_logged = level, now

    def trend(self, key: str, field: str) -> str:
        return fmt.trend_arrow(self.source.series(key, field, fmt.TREND_POINTS))

    def replay_badge(self) -> str | None:
        if self.replay is None:
            return None
        mark = "\u25b6" if getattr(self.replay, "playing", True) else "\u2016"
        pos = self.replay.position_wall
        fmt_ = "%Y-%m-%d %H:%M:%S" if self.size.width >= 100 else "%H:%M:%S"
        when = time.strftime(fmt_, time.localtime(pos)) if pos else "?"
        return f"REPLAY {mark} x{getattr(self.replay, 'speed', 1):g} {when}"

    def _theme_changed(self, _theme: Any) -> None:
        th = self.current_theme
        fmt.set_palette({**GAUGE_DEFAULTS, **th.variables, "accent": th.accent or th.primary})
        if self.snapshot is not None:
            for screen in self._mounted_screens():
                fn = getattr(screen, "refresh_data", None)
                if fn is not None:
                    fn(force=True)

    # -- actions ------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.mode_allows(action):
            return False
        # the key that opened this screen does nothing on it: not offered there
        return type(self.screen).__name__ != _OPENS.get(action)

    def mode_allows(self, action: str) -> bool:
        """Whether ``action`` does something in this mode (live, replay, fleet). One that
        does not is refused, left out of the footer and out of help (``?``): replay keys
        need a replay; time travel needs fleet mode, folding a group fleet mode or a
        router; the load probe needs a live engine's API URL, which neither a replay nor
        Prometheus gives; the raw metrics browser needs kept scrapes, and the requests screen
        the engines' spans, which fleet mode has not; the log view (``L``) a followed log."""
        name = action.split("(")[0]
        fleet = hasattr(self.source, "travel")
        if name in REPLAY_ACTIONS:
            return self.replay is not None
        if name == "collapse":  # fold a model's total (fleet) or a router's backends
            return fleet or bool(self.snapshot is not None and self.snapshot.routers)
        if name == "fleet_travel":
            return fleet
        if name == "probe":
            return self.replay is None and not fleet
        if name in ("raw", "requests"):  # fleet mode reads series from Prometheus: no raw
            return not fleet  # scrape kept, no span received
        if name == "logs":  # an engine's log: where logs are followed (a row has its summary)
            return has_logs(self.snapshot)
        return True

    def action_fleet_travel(self) -> None:
        from llmtop.ui.screens.help import SeekScreen

        self.push_screen(SeekScreen(SeekScreen.TRAVEL_PROMPT), self._travel)

    def _travel(self, text: str | None) -> None:
        if text:
            err = self.source.travel(text)  # type: ignore[attr-defined]
            if err:
                self.notify(err, severity="error")
            self.action_refresh_now()

    def action_help(self) -> None:
        from llmtop.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.BINDINGS))

    def action_pause(self) -> None:
        if self.replay is not None:
            self.replay.toggle_play()
        else:
            self.state.paused = not self.state.paused
        self.request_paint(force=True)

    def action_interval(self, direction: int) -> None:
        self.state.interval_s = next_interval(self.state.interval_s, direction)
        self.notify(f"refresh every {self.state.interval_s:g}s", timeout=2)
        self._wake.set()
        self.request_paint(force=True)

    def action_refresh_now(self) -> None:
        if self.autopoll:
            self._wake.set()
        else:
            self.run_worker(self.poll_once(), group="refresh")
        if self.state.paused:
            self.request_paint(force=True)

    def action_gpus(self) -> None:
        from llmtop.ui.screens.gpu import GpuScreen

        if not isinstance(self.screen, GpuScreen):
            self.push_screen(GpuScreen(self))

    def action_requests(self) -> None:
        from llmtop.ui.screens.requests import RequestsScreen

        if not isinstance(self.screen, RequestsScreen):
            self.push_screen(RequestsScreen(self))

    def action_why(self) -> None:
        from llmtop.ui.screens.why import WhyScreen

        if not isinstance(self.screen, WhyScreen):
            self.push_screen(WhyScreen(self))

    def action_probe(self) -> None:
        from llmtop.ui.screens.probe import ProbeScreen

        if isinstance(self.screen, ProbeScreen):
            return
        target = None
        for screen in self.screen_stack:
            if isinstance(screen, OverviewScreen):
                target = screen.selected_target()
        self.push_screen(ProbeScreen(target, view=self))

    def action_cycle_theme(self) -> None:
        names = self.theme_names
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_screenshot(self) -> None:
        path = self.save_screenshot(path=os.getcwd())
        self.notify(f"screenshot saved: {path}", timeout=5)


def freeze_startup_objects() -> None:
    """Take what start-up made (modules, Textual, the app and its screens: most of the
    objects the cyclic GC tracks) out of its full collections, which then walk only what
    came later (mostly history): an hour in, a fifth of the objects. Collected first, so no
    start-up garbage is kept. Objects frozen here live as long as the app anyway.
    Then young collections are made rarer (``GC_THRESHOLDS``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_tui(config: Config, *, demo: Any = None, record_path: str | None = None,
            args: Any = None, prepared: tuple[Any, list[str]] | None = None) -> int:
    """Run the TUI on a live Monitor (or the demo); returns the exit status. ``prepared``:
    ``ui.live.make_source``'s answer, made (and its first scrapes started) before this
    module was imported."""
    from llmtop.ui.live import make_source

    source, problems = prepared or make_source(config, demo=demo, record_path=record_path,
                                               args=args)
    for line in problems:
        source.event("error", None, line)
    return _run(LlmtopApp(source, config, theme=getattr(args, "theme", None)))


def run_source(monitor: Any, config: Config, *, host: str = "", theme: str | None = None
               ) -> int:
    """Run the TUI on any Monitor-shaped source (``llmtop replay`` passes a ReplaySource)."""
    from llmtop.ui.source import MonitorSource

    source = MonitorSource(monitor, host=host or "replay")
    return _run(LlmtopApp(source, config, theme=theme))


def run_fleet(monitor: Any, config: Config, *, theme: str | None = None) -> int:
    """Run the TUI on a fleet monitor (``llmtop --prometheus URL``)."""
    from llmtop.ui.source import FleetSource

    return _run(LlmtopApp(FleetSource(monitor), config, theme=theme))


def _run(app: LlmtopApp) -> int:
    try:
        app.run()
    finally:
        try:
            asyncio.run(app.source.aclose())
        except Exception:
            pass
    return app.return_code or 0
