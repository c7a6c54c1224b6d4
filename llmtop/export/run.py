"""The exporter's refresh loop: read (direct scrapes or a fleet refresh), then publish.

``direct_store`` gives a ``Monitor`` a store whose diagnosis judges every refresh (the TUI
judges every 5 s: an alert should not wait for that). ``publish_direct``/``publish_fleet``
hand one refresh to the ``ExportState``; ``run`` paces them until stopped. Whatever goes wrong
in one refresh becomes ``llmtop_refresh_errors_total`` and a log line, never the end of the
loop: the HTTP server keeps serving the last view meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from llmtop import clock
from llmtop.config import Config
from llmtop.diagnose.live import attach, findings_of
from llmtop.diagnose.state import Diagnoser
from llmtop.export.state import ExportState
from llmtop.history.store import Store

__all__ = ["direct_store", "publish_direct", "publish_fleet", "run", "tee"]

log = logging.getLogger("llmtop.export")


def direct_store(config: Config) -> Store:
    """A ``Store`` whose diagnosis runs at every commit (pass it to ``Monitor``)."""
    store = Store(config)
    attach(store, Diagnoser(every_s=0.0))
    return store


def tee(*sinks: Callable[[Any], Any] | None) -> Callable[[Any], None]:
    """One ``Monitor`` sink that feeds each of ``sinks``; one failing does not stop the next
    (the first failure is raised after all were fed)."""
    live = [s for s in sinks if s is not None]

    def feed(item: Any) -> None:
        first: BaseException | None = None
        for s in live:
            try:
                s(item)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    return feed


def publish_direct(state: ExportState, monitor: Any, snap: Any, window_s: float,
                   started: float) -> None:
    """One direct-mode refresh: ``snap`` is ``Monitor.tick``'s (the 10 s window); another
    ``window_s`` is taken from the same store at the same moment."""
    if abs(float(snap.window_s) - window_s) > 1e-9:
        snap = monitor.store.snapshot(window_s)
    state.update(snap, list(findings_of(monitor.store)),
                 refresh_s=time.monotonic() - started)


def publish_fleet(state: ExportState, mon: Any, snap: Any, started: float) -> None:
    """One fleet refresh: findings only when the server answered (else the last good rows,
    as the fleet TUI shows them, and a refresh error)."""
    failed = mon.error is not None
    state.update(snap, [] if failed else list(mon.diagnoser.findings),
                 refresh_s=time.monotonic() - started, failed=failed)


async def run(refresh: Callable[[], Awaitable[None]], interval_s: float, stop: asyncio.Event,
              *, duration_s: float | None = None, state: ExportState | None = None) -> None:
    """Call ``refresh`` every ``interval_s`` (start to start) until ``stop`` is set or
    ``duration_s`` has passed."""
    t_start = clock.monotonic()
    while not stop.is_set():
        t0 = clock.monotonic()
        try:
            await refresh()
        except Exception as exc:  # one bad refresh: counted and logged, the loop goes on
            if state is not None:
                state.health.refresh_errors += 1
            log.warning("refresh failed: %s: %s", type(exc).__name__, exc)
        now = clock.monotonic()
        if duration_s is not None and now - t_start >= duration_s:
            break
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, interval_s - (now - t0)) / clock.scale())
        except asyncio.TimeoutError:
            pass
