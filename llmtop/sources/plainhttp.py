"""A lean HTTP/1.1 transport under httpx for ``http://`` scrapes.

httpx stays the client (headers, redirects, timeouts, content decoding); this replaces
httpcore + anyio + h11 beneath it, which cost several times more CPU per scrape
(``docs/benchmarks.md``, "Scraping and parsing"). A monitor scrapes every target every
second on the box it watches, so that difference is most of llmtop's scrape cost.

Scope: one request per connection at a time, keep-alive pooling per (host, port), bodies
framed by ``Content-Length``, ``Transfer-Encoding: chunked`` or the connection closing.
No TLS (``https://`` goes to httpx's own transport), no proxies, no HTTP/2.

Errors are httpx's exceptions, so callers classify them as they would httpcore's:
``ConnectError`` (its ``__cause__`` is the ``OSError``), ``ConnectTimeout``/``ReadTimeout``,
``ReadError`` (a reset), ``RemoteProtocolError`` ("Server disconnected ..." before a
response, a malformed response, or a body cut short).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator

import httpx

__all__ = ["PlainHTTPTransport"]

MAX_HEAD = 64 * 1024
"""Status line + headers larger than this are a protocol error."""
MAX_LINE = 4096
"""A chunk-size or trailer line longer than this is a protocol error."""
READ_HIGH = 1024 * 1024
"""Reading pauses while this much is buffered and unread (huge bodies stay bounded)."""
IDLE_PER_HOST = 8
KEEPALIVE_S = 30.0

_STATUS_RE = re.compile(rb"HTTP/(\d)\.(\d) (\d{3})(?: ([^\r\n]*))?")
_TOKEN_RE = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NO_BODY = (204, 304)


def _disconnected(what: str) -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(what)


class _Conn(asyncio.Protocol):
    """One TCP connection: buffers what arrives, wakes the reader."""

    __slots__ = ("buf", "eof", "exc", "got_any", "idle_since", "paused", "transport", "waiter")

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.eof = False
        self.exc: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.got_any = False
        self.idle_since = 0.0

    # -- protocol callbacks -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.got_any = True
        if len(self.buf) > READ_HIGH and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.exc = exc
        self._wake()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # -- reading ------------------------------------------------------------------------
    @property
    def usable(self) -> bool:
        return not self.eof and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.eof = True
        if self.transport is not None:
            self.transport.close()

    def _take(self, n: int) -> bytes:
        out = bytes(self.buf[:n])
        del self.buf[:n]
        if self.paused and len(self.buf) < READ_HIGH // 2 and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return out

    async def _more(self, timeout: float | None) -> bool:
        """Wait for bytes; False at the end of the stream. Raises ReadTimeout/ReadError."""
        if self.eof:
            if isinstance(self.exc, OSError):
                raise httpx.ReadError(str(self.exc) or type(self.exc).__name__) from self.exc
            return False
        if self.paused and self.transport is not None:  # the reader wants more: let it in
            self.paused = False
            self.transport.resume_reading()
        loop = asyncio.get_running_loop()
        fut = self.waiter = loop.create_future()
        handle = loop.call_later(timeout, _expire, fut) if timeout is not None else None
        try:
            await fut
        finally:
            self.waiter = None
            if handle is not None:
                handle.cancel()
        if not self.buf and self.eof:
            return await self._more(timeout)
        return True

    async def read_head(self, timeout: float | None) -> bytes:
        """Bytes up to and including the blank line that ends a response head."""
        start = 0
        while True:
            i = self.buf.find(b"\n", start)
            while i >= 0:
                j = i + 1
                if self.buf[j : j + 1] == b"\n":
                    return self._take(j + 1)
                if self.buf[j : j + 2] == b"\r\n":
                    return self._take(j + 2)
                i = self.buf.find(b"\n", j)
            start = max(0, len(self.buf) - 2)
            if len(self.buf) >= 5 and not self.buf.startswith(b"HTTP/"):
                line = bytes(self.buf[:60]).split(b"\n", 1)[0]
                raise httpx.RemoteProtocolError(f"illegal status line: {line!r}")
            if len(self.buf) > MAX_HEAD:
                raise httpx.RemoteProtocolError("response head over 64 KiB")
            if not await self._more(timeout):
                if self.buf:
                    raise _disconnected("Server disconnected in the middle of the response head")
                raise _disconnected("Server disconnected without sending a response.")

    async def read_line(self, timeout: float | None) -> bytes:
        """One line (without its line end) of a chunked body."""
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                return self._take(i + 1).rstrip(b"\r\n")
            if len(self.buf) > MAX_LINE:
                raise httpx.RemoteProtocolError("chunk size line too long")
            if not await self._more(timeout):
                raise _cut()

    async def read_some(self, limit: int, timeout: float | None) -> bytes:
        """Up to ``limit`` bytes, waiting for at least one; b"" at the end of the stream."""
        if not self.buf and not await self._more(timeout):
            return b""
        return self._take(min(limit, len(self.buf)))


def _expire(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_exception(httpx.ReadTimeout("timed out waiting for the server"))


def _cut() -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError("peer closed connection without sending complete message body")


class _Head:
    __slots__ = ("headers", "keep", "reason", "status", "version")

    def __init__(self, raw: bytes, request_close: bool) -> None:
        lines = raw.split(b"\n")
        m = _STATUS_RE.fullmatch(lines[0].rstrip(b"\r"))
        if m is None:
            raise httpx.RemoteProtocolError(f"illegal status line: {lines[0][:60]!r}")
        self.version = b"HTTP/%s.%s" % (m.group(1), m.group(2))
        self.status = int(m.group(3))
        self.reason = m.group(4) or b""
        self.headers: list[tuple[bytes, bytes]] = []
        for ln in lines[1:]:
            ln = ln.rstrip(b"\r")
            if not ln:
                continue
            name, sep, value = ln.partition(b":")
            if not sep or _TOKEN_RE.fullmatch(name) is None:
                raise httpx.RemoteProtocolError(f"malformed header line: {ln[:60]!r}")
            self.headers.append((name, value.strip(b" \t")))
        conn = b",".join(v for k, v in self.headers if k.lower() == b"connection").lower()
        if self.version == b"HTTP/1.0":
            self.keep = b"keep-alive" in conn
        else:
            self.keep = b"close" not in conn
        if request_close:
            self.keep = False

    def get(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k.lower() == name]


class _Body(httpx.AsyncByteStream):
    """The response body, framed as its head says; the connection goes back to the pool
    only when the body was read to its end and both sides keep it alive."""

    def __init__(self, pool: PlainHTTPTransport, key: tuple[str, int], conn: _Conn,
                 head: _Head, method: bytes, timeout: float | None) -> None:
        self._pool, self._key, self._conn = pool, key, conn
        self._timeout = timeout
        self._keep = head.keep
        self._done = False
        self._closed = False
        self._length: int | None = None
        self._chunked = False
        te = b",".join(head.get(b"transfer-encoding")).lower()
        if method == b"HEAD" or head.status in _NO_BODY or 100 <= head.status < 200:
            self._length = 0
        elif te:
            self._chunked = te.rsplit(b",", 1)[-1].strip() == b"chunked"
            if not self._chunked:
                self._keep = False  # read to the close
            elif head.get(b"content-length"):
                self._keep = False  # both framings given: do not trust the connection after
        else:
            lengths = {v.strip() for v in b",".join(head.get(b"content-length")).split(b",")
                       if v.strip()}
            if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
                raise httpx.RemoteProtocolError("invalid Content-Length")
            if lengths:
                self._length = int(lengths.pop())
            else:
                self._keep = False  # delimited by the close
        if self._length == 0:
            self._done = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn, timeout = self._conn, self._timeout
        if self._done:
            return
        if self._chunked:
            async for part in self._chunks():
                yield part
        elif self._length is not None:
            async for part in self._exactly(self._length):
                yield part
        else:
            while True:
                data = await conn.read_some(1 << 20, timeout)
                if not data:
                    break
                yield data
        self._done = True

    async def _exactly(self, n: int) -> AsyncIterator[bytes]:
        """``n`` body bytes as they arrive; the stream ending first is a cut body."""
        while n > 0:
            data = await self._conn.read_some(n, self._timeout)
            if not data:
                raise _cut()
            n -= len(data)
            yield data

    async def _chunks(self) -> AsyncIterator[bytes]:
        conn, timeout = self._conn, self._timeout
        while True:
            line = await conn.read_line(timeout)
            size_txt = line.split(b";", 1)[0].strip()
            try:
                size = int(size_txt, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"bad chunk size {size_txt[:20]!r}") from None
            if size < 0:
                raise httpx.RemoteProtocolError("bad chunk size")
            if size == 0:
                while await conn.read_line(timeout):  # trailers, up to the blank line
                    pass
                return
            async for part in self._exactly(size):
                yield part
            if await conn.read_line(timeout):
                raise httpx.RemoteProtocolError("chunk not followed by CRLF")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool._release(self._key, self._conn, self._done and self._keep)


class PlainHTTPTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over plain TCP for httpx's ``AsyncClient`` (``http://`` only)."""

    def __init__(self, *, idle_per_host: int = IDLE_PER_HOST,
                 keepalive_s: float = KEEPALIVE_S) -> None:
        self._idle: dict[tuple[str, int], list[_Conn]] = {}
        self._busy: set[_Conn] = set()
        self._idle_per_host = idle_per_host
        self._keepalive_s = keepalive_s
        self.connects = 0
        """Connections opened so far (tests read it to check reuse)."""

    # -- pool ---------------------------------------------------------------------------
    def _pooled(self, key: tuple[str, int]) -> _Conn | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable and not conn.buf and now - conn.idle_since < self._keepalive_s:
                return conn
            conn.close()
        return None

    def _release(self, key: tuple[str, int], conn: _Conn, reuse: bool) -> None:
        self._busy.discard(conn)
        idle = self._idle.setdefault(key, [])
        if reuse and conn.usable and not conn.buf and len(idle) < self._idle_per_host:
            conn.idle_since = time.monotonic()
            idle.append(conn)
        else:
            conn.close()

    async def _connect(self, host: str, port: int, timeout: float | None) -> _Conn:
        loop = asyncio.get_running_loop()

        async def go() -> _Conn:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            errors: list[OSError] = []
            for family, type_, proto, _name, addr in infos:
                sock = socket.socket(family, type_, proto)
                try:
                    sock.setblocking(False)
                    await loop.sock_connect(sock, addr)
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    _t, conn = await loop.create_connection(_Conn, sock=sock)
                    return conn
                except OSError as exc:
                    sock.close()
                    errors.append(exc)
                except BaseException:
                    sock.close()
                    raise
            refused = [e for e in errors if isinstance(e, ConnectionRefusedError)]
            raise (refused or errors or [OSError(f"no address for {host}")])[0]

        try:
            conn = await (asyncio.wait_for(go(), timeout) if timeout is not None else go())
        except asyncio.TimeoutError:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        self.connects += 1
        return conn

    # -- httpx interface ----------------------------------------------------------------
    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"PlainHTTPTransport serves http:// only, not {url}")
        host = url.host
        port = url.port or 80
        key = (host, port)
        tmo = request.extensions.get("timeout") or {}
        body = await request.aread()
        head = _request_head(request, body)
        close_asked = any(k.lower() == b"connection" and b"close" in v.lower()
                          for k, v in request.headers.raw)
        for attempt in range(2):
            conn = self._pooled(key)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(host, port, tmo.get("connect"))
            self._busy.add(conn)
            conn.got_any = False
            try:
                assert conn.transport is not None
                conn.transport.write(head + body)
                while True:
                    resp_head = _Head(await conn.read_head(tmo.get("read")), close_asked)
                    if not 100 <= resp_head.status < 200 or resp_head.status == 101:
                        break  # 1xx interim answers are skipped
                stream = _Body(self, key, conn, resp_head, request.method.encode(),
                               tmo.get("read"))
            except (httpx.RemoteProtocolError, httpx.ReadError):
                stale = reused and not conn.got_any and conn.eof
                self._release(key, conn, False)
                if stale and attempt == 0 and request.method in ("GET", "HEAD"):
                    continue  # a kept-alive connection the server had closed: once more
                raise
            except BaseException:
                self._release(key, conn, False)
                raise
            if stream._done:  # no body: the connection is free again now
                await stream.aclose()
            return httpx.Response(
                resp_head.status,
                headers=resp_head.headers,
                stream=stream,
                extensions={"http_version": resp_head.version,
                            "reason_phrase": resp_head.reason},
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                c.close()
        self._idle.clear()
        for c in list(self._busy):
            c.close()
        self._busy.clear()


def _request_head(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    chunked = False
    for k, v in request.headers.raw:
        if b"\r" in k or b"\n" in k or b"\r" in v or b"\n" in v:
            raise httpx.LocalProtocolError("header contains a line break")
        if k.lower() == b"transfer-encoding":
            chunked = True
            continue
        lines.append(k + b": " + v)
    if chunked or (body and not request.headers.get("content-length")):
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n"
