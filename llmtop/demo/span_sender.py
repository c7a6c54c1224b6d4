"""Send the demo engines' request spans to an OTLP/HTTP endpoint (``--otlp-traces-endpoint``).

Like an OpenTelemetry batch span processor: ``add`` only appends to a bounded queue (the
simulation never waits on the network); a thread of its own POSTs what is queued once every
``interval_s`` as one protobuf body. A full queue, a receiver that is down, slow or answers
an error: the spans are dropped and counted (``stats()``), one line on stderr when it starts
failing, never a traceback and never a stall of the engines.
"""

from __future__ import annotations

import http.client
import sys
import threading
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any

from llmtop.demo.formats_spans import Attr, DemoSpan, encode_export

__all__ = ["SpanSender"]

MAX_QUEUE = 4096
"""Spans waiting for the next batch (the SDK's ``OTEL_BSP_MAX_QUEUE_SIZE`` is 2048)."""


def _post(url: str, body: bytes, timeout_s: float) -> None:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        resp.read()


class SpanSender:
    """Batches spans per resource and POSTs them; see the module docstring."""

    def __init__(self, endpoint: str, *, interval_s: float = 1.0, max_queue: int = MAX_QUEUE,
                 timeout_s: float = 2.0,
                 post: Callable[[str, bytes, float], None] = _post) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"--otlp-traces-endpoint {endpoint!r}: give an http(s):// URL")
        self.endpoint = endpoint
        self.interval_s = interval_s
        self.max_queue = max_queue
        self.timeout_s = timeout_s
        self._post = post
        self._queue: deque[tuple[tuple[Attr, ...], str, DemoSpan]] = deque()
        self._lock = threading.Lock()
        self.sent = 0
        self.dropped = 0
        self.posts_failed = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="llmtop-demo-spans",
                                            daemon=True)
            self._thread.start()

    def add(self, resource: tuple[Attr, ...], scope: str, span: DemoSpan | None) -> None:
        """Queue ``span`` (None: nothing); when the queue is full it is dropped and counted."""
        if span is None:
            return
        with self._lock:
            if len(self._queue) >= self.max_queue:
                self.dropped += 1
                return
            self._queue.append((resource, scope, span))

    def flush(self) -> int:
        """POST what is queued now (one body); the number of spans sent."""
        with self._lock:
            batch = list(self._queue)
            self._queue.clear()
        if not batch:
            return 0
        groups: dict[tuple[tuple[Attr, ...], str], list[DemoSpan]] = {}
        for resource, scope, span in batch:
            groups.setdefault((resource, scope), []).append(span)
        body = encode_export([(r, s, spans) for (r, s), spans in groups.items()])
        try:
            self._post(self.endpoint, body, self.timeout_s)
        except (OSError, urllib.error.URLError, http.client.HTTPException, ValueError) as exc:
            self.dropped += len(batch)
            self.posts_failed += 1
            if self.last_error is None:
                print(f"llmtop demo: spans to {self.endpoint} dropped ({exc}); "
                      "the engines keep serving", file=sys.stderr, flush=True)
            self.last_error = str(exc) or type(exc).__name__
            return 0
        self.sent += len(batch)
        self.last_error = None
        return len(batch)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def close(self) -> None:
        """Stop the thread (what is still queued is dropped uncounted: the demo is ending)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s + 1.0)
            self._thread = None

    def stats(self) -> dict[str, Any]:
        with self._lock:
            queued = len(self._queue)
        return {"endpoint": self.endpoint, "sent": self.sent, "dropped": self.dropped,
                "queued": queued, "posts_failed": self.posts_failed,
                "last_error": self.last_error}
