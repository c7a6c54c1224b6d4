"""Feeding one tick's results: the sink (the recorder, the exporter) first, then the store.

- Every ``RawScrape``, ``GpuSample``, ``RawSpans`` and ``RawLog`` goes to the sink, then to
  its store method; a large body is parsed in a worker thread (``THREAD_PARSE_BYTES``), the store
  changed only on the loop.
- An exception anywhere (sink, store, a task) becomes an event-log line; the loop goes on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from llmtop.history.store import Store
from llmtop.model import RawLog, RawScrape

__all__ = ["THREAD_PARSE_BYTES", "Feeder", "Sink"]

THREAD_PARSE_BYTES = 1 << 20
"""Bodies larger than this are parsed in a worker thread, off the event loop."""

Sink = Callable[[Any], Any]
"""Receives every raw input before the store does (may return an awaitable)."""


class Feeder:
    """The sink and the store of one monitor, and its error events."""

    def __init__(self, store: Store, sink: Sink | None) -> None:
        self.store = store
        self.sink = sink

    async def feed(self, item: Any, ingest: Callable[[Any], None]) -> None:
        """``item`` to the sink, then to ``ingest`` (a store method)."""
        target = item.target if isinstance(item, (RawScrape, RawLog)) else None
        if self.sink is not None:
            try:
                res = self.sink(item)
                if inspect.isawaitable(res):
                    await res
            except Exception as exc:
                self.error(target, "recorder", exc)
        try:
            if (isinstance(item, RawScrape) and item.body is not None
                    and len(item.body) > THREAD_PARSE_BYTES
                    and ingest == self.store.ingest):
                # a large body would stall the event loop (the UI's) for seconds: parse it
                # in a worker thread; the store is only changed here, on the loop
                parsed = await asyncio.to_thread(self.store.parse_raw, item)
                self.store.ingest(item, parsed)
            else:
                ingest(item)
        except Exception as exc:
            self.error(target, "store", exc)

    def result(self, task: asyncio.Future[Any], target: str | None, what: str = "scrape"
               ) -> Any:
        """A finished task's result; None (and an error event) when it failed."""
        if task.cancelled():
            return None
        exc = task.exception()
        if exc is not None:
            self.error(target, what, exc)
            return None
        return task.result()

    def error(self, target: str | None, what: str, exc: BaseException) -> None:
        """One event-log line: "<what> failed: <type>: <message>"."""
        try:
            self.store.event("error", target, f"{what} failed: {type(exc).__name__}: {exc}")
        except Exception:  # the event log itself must never take the loop down
            pass
