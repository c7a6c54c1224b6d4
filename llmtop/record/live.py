"""Record while monitoring: attach a ``Recorder`` to a ``Monitor`` as its sink.

- ``attach`` (the TUI's and ``--once``'s ``--record``) runs the recorder on a thread of its
  own (``BackgroundRecorder``): the monitor's loop, the TUI's, only hands things over.
"""

from __future__ import annotations

import asyncio
from typing import Any

from llmtop.config import Config
from llmtop.record.background import BackgroundRecorder
from llmtop.record.recorder import Recorder

__all__ = ["RecordingMonitor", "attach"]


class RecordingMonitor:
    """A Monitor whose scrapes, GPU samples and ticks also go to a recording."""

    def __init__(self, monitor: Any, recorder: Recorder | BackgroundRecorder) -> None:
        self.monitor = monitor
        self.recorder = recorder
        monitor.sink = recorder

    def __getattr__(self, name: str) -> Any:
        return getattr(self.monitor, name)

    async def tick(self, **kw: Any) -> Any:
        snap = await self.monitor.tick(**kw)
        store = self.monitor.store
        if store.now_mono is not None and store.now_wall is not None:
            self.recorder.tick(store.now_mono, store.now_wall)
        return snap

    async def aclose(self) -> None:
        try:
            await self.monitor.aclose()
        finally:
            await asyncio.to_thread(self.recorder.close)


def attach(monitor: Any, path: str, config: Config, *, retention_s: float | None = None,
           max_bytes: int | None = None) -> RecordingMonitor:
    """Wrap ``monitor`` so everything it reads is also recorded to ``path``, from a thread
    of its own."""
    return RecordingMonitor(monitor, BackgroundRecorder(Recorder(
        path, config, retention_s=retention_s, max_bytes=max_bytes)))
