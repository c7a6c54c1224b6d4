"""The OTLP trace receiver: engines POST their request spans here (``docs/requests.md``).

- ``OtlpReceiver`` serves OTLP/HTTP ``POST /v1/traces`` (protobuf or JSON, gzip or not), and
  gRPC ``TraceService/Export`` when asked (``otlp_grpc``, needs the ``grpcio`` extra).
- Each body is checked, decoded in the connection's thread and put on a bounded queue as a
  ``RawSpans``; the monitor takes them with ``drain()`` once a tick, so nothing here ever
  runs on the UI's event loop.
- Bad input is answered with an HTTP error and counted (``stats()``), never raised: a wrong
  content type 415, a body over ``max_body`` (sent or gunzipped) 413, garbage or truncated
  400, a missing token 401.
- The queue is bounded twice: by spans (``max_pending_spans``) and by bytes
  (``max_pending_bytes``: the bodies queued plus those being read, so a flood of bodies
  that hold no spans cannot grow memory either). A body that would pass either bound is
  shed: refused unread with 429 and ``Retry-After`` (OTLP/HTTP's retryable answer to an
  overloaded server), counted in ``dropped_bodies`` / ``dropped_bytes``, named in
  ``last_error``.
- Threads, TLS, the token check, the connection cap and the read timeout are the shared
  server's (``llmtop/httpserve.py``), as for the exporter's ``/metrics``. Policy (loopback
  by default, a token or TLS off it) is the caller's: ``cli/listen.py`` checks the options
  and passes ``allows`` (checks the ``Authorization`` header) and an ``ssl.SSLContext``.
"""

from __future__ import annotations

import ssl
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

from llmtop.httpserve import READ_TIMEOUT_S, Flags, Handler, Listen, Server
from llmtop.model import RawSpans
from llmtop.sources.otlp_decode import (
    OverBudget,
    SpanDecodeError,
    decode,
    empty_response,
    partial_response,
)

__all__ = ["DEFAULT_OTLP_LISTEN", "MAX_BODY", "MAX_PENDING_BYTES", "MAX_PENDING_SPANS",
           "MAX_SPANS_PER_S", "OTLP_FLAGS", "Busy", "OtlpReceiver"]

DEFAULT_OTLP_LISTEN = "127.0.0.1:4318"
MAX_BODY = 8 * 1024 * 1024
"""Largest body accepted, as sent and once gunzipped (an exporter's batch of 512 spans is
well under 1 MiB)."""
MAX_PENDING_SPANS = 50_000
"""Spans waiting for the next ``drain()``; beyond this, bodies are refused (429)."""
MAX_PENDING_BYTES = 32 * 1024 * 1024
"""Bytes of bodies waiting for the next ``drain()`` or being read; a body that would pass
this is refused (429). Four of the largest bodies; a tick's worth of spans at the rate
budget is a small part of it."""
MAX_SPANS_PER_S = 500
"""Spans converted per second at most (a 1 s bucket): beyond it a body is parsed only far
enough to count its spans, answered as rejected (OTLP partial success: the sender does not
retry) and counted as dropped. It keeps a flood's CPU bounded (``docs/benchmarks.md``)."""
OTLP_FLAGS = Flags.named("--otlp-listen", "--otlp", "the engines send", "take spans from")
"""The receiver's options (``cli/otlp.py``); ``--otlp-grpc-listen`` shares the token and TLS."""
_TYPES = {"application/x-protobuf": "protobuf", "application/protobuf": "protobuf",
          "application/json": "json"}
_ANSWERED = object()
_COUNTERS = ("bodies", "spans", "bad", "too_large", "unauthorized", "wrong_type",
             "dropped_bodies", "dropped_bytes", "dropped_spans", "truncated")


class Busy(Exception):
    """The queue is at one of its bounds: the body was shed (and counted)."""


def gunzip(body: bytes, limit: int) -> bytes | None:
    """``body`` gunzipped, or None when it would exceed ``limit`` bytes. Raises zlib.error."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(body, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        return None
    if not d.eof:
        raise zlib.error("truncated gzip stream")
    return out


class OtlpReceiver:
    """Receives OTLP trace exports; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", port: int = 4318, *,
                 allows: Callable[[str | None], bool] | None = None,
                 tls: ssl.SSLContext | None = None, max_body: int = MAX_BODY,
                 max_pending_spans: int = MAX_PENDING_SPANS,
                 max_pending_bytes: int = MAX_PENDING_BYTES,
                 max_spans_per_s: float = MAX_SPANS_PER_S,
                 read_timeout_s: float = READ_TIMEOUT_S,
                 clock: Callable[[], float] = time.time,
                 mono: Callable[[], float] = time.monotonic) -> None:
        self.max_body = max_body
        self.max_pending_spans = max_pending_spans
        self.max_pending_bytes = max_pending_bytes
        self.max_spans_per_s = max_spans_per_s
        self._bucket = float(max_spans_per_s)
        self._bucket_t = mono()
        self.allows = allows
        self._clock, self._mono = clock, mono
        self._lock = threading.Lock()
        self._queue: deque[RawSpans] = deque()
        self._pending = 0
        self._bytes = 0
        """Bytes queued plus bytes reserved by bodies being read (``reserve``)."""
        self.counts = dict.fromkeys(_COUNTERS, 0)
        self.last_error: str | None = None
        self.grpc: Any = None
        self._server = Server(Listen(host, port, allows, tls), _handler(self),
                              name="llmtop-otlp-http", flag=OTLP_FLAGS.listen,
                              read_timeout_s=read_timeout_s)
        self.host, self.port = self._server.host, self._server.port
        self.tls = self._server.tls

    @property
    def url(self) -> str:
        """Where engines send: the ``--otlp-traces-endpoint`` to give vLLM."""
        return self._server.url("/v1/traces")

    # -- what the listeners call ----------------------------------------------------------
    def count(self, what: str, error: str | None = None) -> None:
        with self._lock:
            self.counts[what] += 1
            if error is not None:
                self.last_error = error

    def reserve(self, nbytes: int) -> bool:
        """Room for a body of ``nbytes`` before it is read: True and the bytes are held
        (``accept`` or ``release`` gives them back); False when the queue is at a bound, and
        the body is counted as shed."""
        with self._lock:
            if (self._pending >= self.max_pending_spans
                    or self._bytes + nbytes > self.max_pending_bytes):
                self._shed(nbytes)
                return False
            self._bytes += nbytes
            return True

    def release(self, nbytes: int) -> None:
        """Give back bytes ``reserve`` held for a body that is not queued."""
        with self._lock:
            self._bytes -= nbytes

    def _shed(self, nbytes: int) -> None:
        self.counts["dropped_bodies"] += 1
        self.counts["dropped_bytes"] += nbytes
        full = ("spans" if self._pending >= self.max_pending_spans
                else f"{self.max_pending_bytes / 2**20:g} MiB")
        self.last_error = f"flood: queue full ({full}), bodies dropped"

    def _drop_flood(self, nbytes: int, spans: int) -> None:
        with self._lock:
            self.counts["dropped_bodies"] += 1
            self.counts["dropped_bytes"] += nbytes
            self.counts["dropped_spans"] += spans
            self.last_error = f"flood: over {self.max_spans_per_s:g} spans/s, spans dropped"

    def _admit(self, n: int) -> bool:
        """Take ``n`` spans from the rate bucket (refilled at ``max_spans_per_s``); with
        ``n == 0``: whether there is at least one span left."""
        with self._lock:
            now = self._mono()
            self._bucket = min(float(self.max_spans_per_s),
                               self._bucket + (now - self._bucket_t) * self.max_spans_per_s)
            self._bucket_t = now
            if n == 0:
                return self._bucket >= 1.0
            if n > self._bucket and self._bucket < self.max_spans_per_s:
                return False  # a body bigger than the whole bucket passes only when full
            self._bucket -= n
            return True

    def accept(self, body: bytes, kind: str, peer: str | None, transport: str,
               reserved: int = 0) -> str | int | None:
        """Decode ``body`` and queue it: None when queued, the number of spans refused over
        the rate budget (0: not even counted, the bucket was empty), or the reason it is
        bad. ``reserved``: the bytes ``reserve`` holds for it (given back or kept here).
        Raises ``Busy`` (counted) when its bytes do not fit."""
        size = len(body)
        with self._lock:  # hold what it is now (a gunzipped body is bigger than it was sent)
            if size > reserved and self._bytes - reserved + size > self.max_pending_bytes:
                self._bytes -= reserved
                self._shed(size)
                raise Busy
            self._bytes += size - reserved
        verdict = self._decode(body, kind)
        if not isinstance(verdict, list):
            self.release(size)
            return verdict
        item = RawSpans(t_wall=self._clock(), t_mono=self._mono(), body=body, kind=kind,
                        peer=peer, transport=transport, spans=verdict)
        with self._lock:
            self._queue.append(item)
            self._pending += len(verdict)
            self.counts["bodies"] += 1
            self.counts["spans"] += len(verdict)
        return None

    def _decode(self, body: bytes, kind: str) -> list[Any] | str | int:
        """The spans of ``body``, or what ``accept`` answers instead (see there)."""
        if self._admit(0) is False:  # empty bucket: not even parsed
            self._drop_flood(len(body), 0)
            return 0
        try:
            return decode(body, kind, self._admit)
        except OverBudget as exc:
            self._drop_flood(len(body), exc.spans)
            return exc.spans
        except SpanDecodeError as exc:
            self.count("bad", str(exc))
            return str(exc)
        except BaseException:
            self.release(len(body))
            raise

    # -- what the monitor calls -----------------------------------------------------------
    def drain(self) -> list[RawSpans]:
        """Every body queued since the last call, oldest first."""
        with self._lock:
            items = list(self._queue)
            self._queue.clear()
            self._pending = 0
            self._bytes -= sum(len(x.body) for x in items)
        return items

    def stats(self) -> dict[str, Any]:
        """Counters since start, the spans waiting, and the last error (for the UI/JSON)."""
        with self._lock:
            return {**self.counts, "pending_spans": self._pending,
                    "pending_bytes": self._bytes,
                    "last_error": self.last_error, "url": self.url}

    def close(self) -> None:
        if self.grpc is not None:
            self.grpc.stop(0)
        self._server.close()


def _handler(rx: OtlpReceiver) -> type[Handler]:
    class TracesHandler(Handler):
        server_version = "llmtop-otlp"
        protocol_version = "HTTP/1.1"

        def refused(self) -> None:
            rx.count("unauthorized", "a body without the right token")

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/v1/traces":
                self.send(404, b"not found: POST /v1/traces\n")
                return
            if not self.authorized():
                return
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            kind = _TYPES.get(ctype)
            enc = (self.headers.get("Content-Encoding") or "identity").strip().lower()
            if kind is None or enc not in ("identity", "gzip"):
                what = f"content type {ctype or '(none)'}" if kind is None else f"encoding {enc}"
                rx.count("wrong_type", f"{what} is not OTLP/HTTP traces")
                self.send(415, f"unsupported {what}: want application/x-protobuf or "
                           "application/json, identity or gzip\n".encode())
                return
            try:
                length = int(self.headers.get("Content-Length") or "")
            except ValueError:
                rx.count("bad", "no Content-Length")
                self.send(411, b"Content-Length required\n")
                return
            if length < 0 or length > rx.max_body:
                rx.count("too_large", f"a body of {length} bytes (limit {rx.max_body})")
                self.send(413, b"body too large\n")
                return
            if not rx.reserve(length):  # at a bound: shed unread
                self._busy()
                return
            try:
                why = self._read_and_accept(length, enc, kind)
            except Busy:
                self._busy()
                return
            if why is _ANSWERED:
                return
            if isinstance(why, int):  # over the rate budget: rejected, not to be retried
                self.send(200, partial_response(why, "llmtop: over its span rate budget, "
                                                 "spans dropped", kind), ctype=ctype)
                return
            if why is not None:
                self.send(400, f"{why}\n".encode())
                return
            self.send(200, empty_response(kind), ctype=ctype)

        def _read_and_accept(self, length: int, enc: str, kind: str) -> Any:
            """Read the body ``reserve`` made room for and hand it to ``accept``: what that
            answers, or ``_ANSWERED`` when the body was bad and answered here."""
            try:
                body = self.rfile.read(length)
            except OSError:
                body = b""
            if len(body) < length:
                rx.release(length)
                rx.count("truncated", f"body ended after {len(body)} of {length} bytes")
                self.close_connection = True
                return _ANSWERED
            if enc == "gzip":
                try:
                    unpacked = gunzip(body, rx.max_body)
                except zlib.error:
                    unpacked = None
                    rx.count("bad", "bad gzip data")
                    self.send(400, b"bad gzip data\n")
                else:
                    if unpacked is None:
                        rx.count("too_large", f"a gzip body over {rx.max_body} bytes unpacked")
                        self.send(413, b"body too large once gunzipped\n")
                if unpacked is None:
                    rx.release(length)
                    return _ANSWERED
                body = unpacked
            return rx.accept(body, kind, self.client_address[0], "http", reserved=length)

        def _busy(self) -> None:
            self.close_connection = True
            self.send(429, b"busy: queue full\n", {"Retry-After": "1"})

        def do_GET(self) -> None:
            self.send(405, b"POST OTLP trace exports to /v1/traces\n", {"Allow": "POST"})

    return TracesHandler
