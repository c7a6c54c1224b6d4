"""Build the live ``Source`` for ``run_tui``: a Monitor (plus the recorder hook when asked)."""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Any

from llmtop.config import Config
from llmtop.model import Event, Snapshot
from llmtop.ui.source import MonitorSource

__all__ = ["NullSource", "make_source"]


class NullSource:
    """Shown when the monitor cannot start: empty snapshots, the reason in the event log."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._events: deque[Event] = deque(maxlen=200)

    async def tick(self) -> Snapshot:
        return Snapshot(time=time.time(), window_s=10.0, gpu_error="no monitor")

    def snapshot(self, window_s: float) -> Snapshot | None:
        return None

    def series(self, key: str, field: str, last: int | None = None) -> list[float | None]:
        return []

    def gpu_series(self, key: str, field: str, last: int | None = None
                   ) -> list[float | None]:
        return []

    def series_count(self) -> int | None:
        return 0

    def series_times(self, last: int | None = None) -> list[float]:
        return []

    def events(self) -> list[Event]:
        return list(self._events)

    def event(self, level: str, target: str | None, text: str) -> None:
        self._events.append(Event(time.time(), level, target, text))

    def raw_families(self, target: str) -> tuple[dict, dict, float]:
        return {}, {}, 0.0

    def request_window(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def _record_bounds(args: Any) -> dict[str, Any]:
    """``--retention HOURS`` / ``--max-size SIZE`` as the recorder's keyword arguments."""
    kw: dict[str, Any] = {}
    hours = getattr(args, "retention", None)
    if hours is not None:
        kw["retention_s"] = float(hours) * 3600
    size = getattr(args, "max_size", None)
    if size:
        from llmtop.record.recorder import parse_size

        kw["max_bytes"] = parse_size(size)
    return kw


def make_source(config: Config, *, demo: Any = None, record_path: str | None = None,
                args: Any = None, prefetch: bool = False, receiver: Any = None
                ) -> tuple[Any, list[str]]:
    """The source to poll, and error lines to show in the event log. ``prefetch``: start the
    first scrapes now (``Monitor.prefetch``), before the caller imports Textual;
    ``receiver``: the span receiver (``--otlp-listen``), given to the monitor."""
    host = socket.gethostname()
    problems: list[str] = []
    try:
        from llmtop.monitor import Monitor
    except ImportError as exc:
        src = NullSource(host)
        src.event("error", None, f"monitor unavailable: {exc}")
        return src, problems
    # no TARGET: search this machine now (in prefetch's thread) and every 10 s after
    monitor = Monitor.from_config(config, demo=demo,
                                  rediscover=config.discover and not config.targets,
                                  receiver=receiver)
    if prefetch:
        monitor.prefetch()
    if record_path:
        try:
            from llmtop.record.live import attach
        except ImportError:
            problems.append(f"--record {record_path}: recording is not available in this build")
        else:
            try:
                wrapped = attach(monitor, record_path, config, **_record_bounds(args))
                monitor = wrapped if wrapped is not None else monitor
            except Exception as exc:
                problems.append(f"--record {record_path}: {type(exc).__name__}: {exc}")
    return MonitorSource(monitor, host=host), problems
