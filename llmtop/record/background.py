"""Record from a thread of its own, off the TUI's loop.

- What the loop hands over is queued; encoding, compression and writing happen on the
  recorder's thread.
- ``BackgroundRecorder`` wraps one ``Recorder``; only its thread touches it, in the order
  things were handed over (scrapes, GPU samples, span bodies, tick marks).
- Span bodies waiting for the thread are bounded by bytes (``PENDING_SPAN_BYTES``): beyond
  it a body is counted as dropped (the recording's ``od`` record), never queued.
- A write error is raised to the next caller (the monitor reports it as the recorder's).
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from llmtop.model import RawSpans
from llmtop.record.recorder import SPAN_BYTES_PER_SEGMENT, Recorder

__all__ = ["PENDING_SPAN_BYTES", "BackgroundRecorder"]

PENDING_SPAN_BYTES = SPAN_BYTES_PER_SEGMENT
"""Span body bytes handed over and not yet written, at most."""

_STOP = object()


class BackgroundRecorder:
    """A ``Recorder`` run by a thread of its own (see the module docstring)."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.dropped = 0
        """Span bodies not queued (over ``PENDING_SPAN_BYTES``)."""
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0
        self._error: Exception | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="llmtop-recorder", daemon=True)
        self._thread.start()

    def __call__(self, item: Any) -> None:
        """Hand over one ``RawScrape``, ``GpuSample`` or ``RawSpans`` (a Monitor sink)."""
        self._raise()
        if isinstance(item, RawSpans):
            size = len(item.body)
            with self._lock:
                if self._pending + size > PENDING_SPAN_BYTES:
                    self.dropped += 1
                    self._queue.put(("dropped", None))
                    return
                self._pending += size
        self._queue.put(("item", item))

    def tick(self, t_mono: float, t_wall: float) -> None:
        """Mark the end of a monitor tick."""
        self._raise()
        self._queue.put(("tick", (t_mono, t_wall)))

    def close(self) -> None:
        """Write what was handed over, then close the recording (blocks until done)."""
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join()
        self.recorder.close()
        self._raise()

    def _raise(self) -> None:
        err, self._error = self._error, None
        if err is not None:
            raise err

    def _run(self) -> None:
        while (got := self._queue.get()) is not _STOP:
            kind, item = got
            try:
                if kind == "item":
                    self.recorder(item)
                elif kind == "tick":
                    self.recorder.tick(*item)
                else:
                    self.recorder.spans_dropped += 1
            except Exception as exc:
                self._error = exc
            finally:
                if isinstance(item, RawSpans):
                    with self._lock:
                        self._pending -= len(item.body)
