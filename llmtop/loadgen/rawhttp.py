"""A minimal HTTP/1.1 streaming client on raw asyncio protocols: the probe's hot path.

Chosen by measurement (``benchmarks/README-probe.md``): at 256 streams of 50 tok/s it read
TTFT within a few ms where aiohttp over-read by tens of ms, at less CPU. Each chunk is
timestamped in ``data_received`` (no stream reader, no task wake-up in between), the
chunked transfer encoding is decoded here and the payload goes straight into
``client.SSEReader``. Keep-alive connections are pooled; TLS via ``ssl``.

Scope: POST with a JSON body; responses with ``Transfer-Encoding: chunked``, a
``Content-Length``, or delimited by the connection closing. No proxies, no redirects, no
compression (none is asked for). Same ``request(body) -> Result`` as ``StreamClient``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from urllib.parse import urlsplit

from llmtop.loadgen.client import Result, SSEReader, parse_retry_after
from llmtop.model.request_records import probe_traceparent
from llmtop.urls import default_port, netloc

__all__ = ["RawStreamClient"]

_perf = time.perf_counter
_MAX_HEAD = 64 * 1024


class _Conn(asyncio.Protocol):
    __slots__ = ("closed", "ex", "skip", "transport")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.ex: _Exchange | None = None
        self.closed = False
        self.skip = b""
        """The end of the last chunked body (its final CRLF), still owed by the server: the
        next bytes must be these and are swallowed (llama-server sends them late, alone)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.skip:
            n = min(len(self.skip), len(data))
            if data[:n] != self.skip[:n]:
                self.closed = True  # not the framing we were owed: never trust this one
                if self.transport is not None:
                    self.transport.close()
                return
            self.skip, data = self.skip[n:], data[n:]
            if not data:
                return
        ex = self.ex
        if ex is not None:
            ex.feed(data)
        elif self.transport is not None:  # bytes nobody asked for: do not reuse
            self.closed = True
            self.transport.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.ex
        if ex is not None:
            ex.lost()


class _Exchange:
    """One request/response on one connection."""

    __slots__ = ("body_left", "buf", "chunk_left", "crlf", "fut", "keep", "mode", "owed", "res",
                 "seen", "sse", "state", "t_data")

    def __init__(self, res: Result, fut: asyncio.Future[None]) -> None:
        self.res = res
        self.fut = fut
        self.state = 0  # 0 head, 1 body, 2 done
        self.buf = b""
        self.mode = "close"  # chunked | length | close
        self.body_left = 0
        self.chunk_left = 0
        self.crlf = 0
        self.keep = True
        self.owed = b""
        """Bytes of the body's framing not yet received when the response was complete."""
        self.sse: SSEReader | None = None
        self.seen = False
        """True once any response byte arrived."""
        self.t_data = _perf()
        """When bytes last arrived (or the request was sent): the idle watchdog reads it."""

    def _done(self, keep: bool) -> None:
        self.state = 2
        self.keep = self.keep and keep
        if not self.fut.done():
            self.fut.set_result(None)

    def _head(self, buf: bytes) -> bytes | None:
        i = buf.find(b"\r\n\r\n")
        if i < 0:
            if len(buf) > _MAX_HEAD:
                self.res.error = "client_error"
                self._done(False)
            self.buf = buf
            return None
        lines = buf[:i].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        try:
            status = int(parts[1])
        except (IndexError, ValueError):
            self.res.error = "client_error"
            self._done(False)
            return None
        if 100 <= status < 200:  # an interim response: skip it
            rest = buf[i + 4:]
            if rest:
                return self._head(rest)
            self.buf = b""
            return None
        headers: dict[str, str] = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        if parts[0] == "HTTP/1.0" or headers.get("connection", "").lower() == "close":
            self.keep = False
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.mode = "chunked"
        elif "content-length" in headers:
            self.mode = "length"
            self.body_left = int(headers["content-length"])
        else:
            self.mode = "close"
            self.keep = False
        if status != 200:
            self.res.error = f"http_{status}"
            if status in (429, 503):
                self.res.retry_after = parse_retry_after(headers.get("retry-after"))
        else:
            self.sse = SSEReader(self.res)
        self.state = 1
        return buf[i + 4:]

    def feed(self, data: bytes) -> None:
        t = _perf()
        self.seen = True
        self.t_data = t
        if self.state == 2:
            return
        buf = self.buf + data if self.buf else data
        self.buf = b""
        if self.state == 0:
            rest = self._head(buf)
            if rest is None:
                return
            buf = rest
            if self.mode == "length" and self.body_left == 0:
                self._end_body()
                return
        sse = self.sse
        if self.mode == "chunked":
            pos, n = 0, len(buf)
            while pos < n:
                if self.chunk_left == 0 and self.crlf == 0:
                    j = buf.find(b"\r\n", pos)
                    if j < 0:
                        self.buf = buf[pos:]
                        return
                    try:
                        size = int(buf[pos:j].split(b";", 1)[0], 16)
                    except ValueError:
                        self._fail_body("truncated_stream")
                        return
                    pos = j + 2
                    if size == 0:
                        self._last_chunk(buf[pos:])
                        return
                    self.chunk_left = size
                    self.crlf = 2
                if self.chunk_left:
                    take = min(self.chunk_left, n - pos)
                    if sse is not None and sse.feed(buf[pos:pos + take], t):
                        self._done(False)
                        return
                    pos += take
                    self.chunk_left -= take
                if self.chunk_left == 0 and self.crlf:
                    skip = min(self.crlf, n - pos)
                    pos += skip
                    self.crlf -= skip
            return
        if self.mode == "length":
            buf = buf[:self.body_left]
            self.body_left -= len(buf)
        if sse is not None and buf and sse.feed(buf, t):
            self._done(False)
            return
        if self.mode == "length" and self.body_left <= 0:
            self._end_body()

    def idle_timeout(self) -> None:
        if self.state != 2:
            self.res.error = "timeout"
            self._done(False)

    def _fail_body(self, error: str) -> None:
        if self.res.error is None:
            self.res.error = error
        self._done(False)

    def _last_chunk(self, rest: bytes) -> None:
        """The zero-size chunk: the stream is complete. Its terminating CRLF (no trailers are
        asked for) may come in a later packet; it is then owed by the connection, so that it
        is not taken for the start of the next response on it (that once turned a reused
        connection's next request into a ``connect`` error: one request short)."""
        if len(rest) <= 2 and rest == b"\r\n"[:len(rest)]:
            self.owed = b"\r\n"[len(rest):]
            self._end_body()
        else:  # trailer fields: never asked for; do not reuse this connection
            self._end_body()
            self.keep = False

    def _end_body(self) -> None:
        if self.sse is not None:
            self.sse.finish()
        self._done(True)

    def lost(self) -> None:
        if self.state == 2:
            return
        if self.state == 1 and self.mode == "close":
            self._end_body()  # the close delimits the body
            self.keep = False
            return
        if self.state == 1 and self.sse is not None:
            self.sse.finish()
            if self.res.error is None:
                self.res.error = "truncated_stream"
        elif self.res.error is None or self.state == 0:
            self.res.error = "truncated_stream" if self.res.t_first else "connect"
        self._done(False)


class RawStreamClient:
    """Pooled keep-alive HTTP/1.1 connections to one endpoint URL."""

    def __init__(self, endpoint_url: str, *, api_key: str | None = None, insecure: bool = False,
                 timeout_s: float = 300.0, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 60.0) -> None:
        u = urlsplit(endpoint_url)
        self.endpoint_url = endpoint_url
        self.host = u.hostname or "127.0.0.1"
        tls = u.scheme == "https"
        self.port = u.port or default_port(u.scheme)
        self.ssl: ssl.SSLContext | None = None
        if tls:
            self.ssl = ssl.create_default_context()
            if insecure:
                self.ssl.check_hostname = False
                self.ssl.verify_mode = ssl.CERT_NONE
        host_hdr = netloc(self.host, u.port or None)
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        head = (f"POST {path} HTTP/1.1\r\nHost: {host_hdr}\r\nUser-Agent: llmtop-probe\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"traceparent: {probe_traceparent()}\r\n")  # marks the probe's requests
        if api_key:
            head += f"Authorization: Bearer {api_key}\r\n"
        self._head = head.encode("latin-1") + b"Content-Length: "
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = min(read_timeout_s, timeout_s)
        """A stream silent for this long fails with ``timeout`` (checked once a second)."""
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._active: set[_Exchange] = set()
        self._watchdog: asyncio.Task[None] | None = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            limit = _perf() - self.read_timeout_s
            for ex in [e for e in self._active if e.t_data < limit]:
                ex.idle_timeout()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        _t, conn = await asyncio.wait_for(
            loop.create_connection(_Conn, self.host, self.port, ssl=self.ssl),
            self.connect_timeout_s)
        self._all.add(conn)
        return conn

    async def request(self, body: bytes, res: Result | None = None) -> Result:
        """Send one streaming request into ``res`` (a new ``Result`` when None); never raises
        except ``CancelledError``.

        A kept-alive connection that the server closed before answering is replaced once by
        a fresh one (the request never reached the server), as browsers do.
        """
        res = Result(_perf()) if res is None else res
        for attempt in range(2):
            conn = None
            while self._idle and attempt == 0:  # a retry never takes another pooled one
                c = self._idle.pop()
                if not c.closed:
                    conn = c
                    break
            reused = conn is not None
            if conn is None:
                try:
                    conn = await self._connect()
                except asyncio.CancelledError:
                    raise
                except (asyncio.TimeoutError, TimeoutError):
                    res.error = "timeout"
                except ssl.SSLError:
                    res.error = "client_error"
                except OSError:
                    res.error = "connect"
            if conn is None or conn.transport is None:
                if res.error is None:
                    res.error = "connect"
                break
            loop = asyncio.get_running_loop()
            if self._watchdog is None:
                self._watchdog = loop.create_task(self._watch())
            fut: asyncio.Future[None] = loop.create_future()
            ex = _Exchange(res, fut)
            conn.ex = ex
            self._active.add(ex)
            reuse = False
            try:
                conn.transport.write(self._head + b"%d\r\n\r\n" % len(body) + body)
                await asyncio.wait_for(asyncio.shield(fut), self.timeout_s)
                reuse = ex.keep and not conn.closed
                conn.skip = ex.owed
            except asyncio.TimeoutError:
                res.error = "timeout"
            finally:
                self._active.discard(ex)
                conn.ex = None
                if reuse:
                    self._idle.append(conn)
                else:
                    self._drop(conn)
            if reused and not ex.seen and res.error == "connect":
                res.error = None  # stale keep-alive connection: try once on a new one
                continue  # (the retry connects anew, so it is never "reused": this ends)
            break
        res.t_end = _perf()
        return res

    def _drop(self, conn: _Conn) -> None:
        self._all.discard(conn)
        conn.closed = True
        if conn.transport is not None:
            conn.transport.close()

    async def aclose(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        for c in list(self._all):
            self._drop(c)
        self._idle.clear()
        await asyncio.sleep(0)
