"""A small HTTP/1.1 server on ``asyncio.start_server`` for the demo engines (stdlib only).

Enough of HTTP/1.1 for the demo's clients (llmtop's scrapes, the probe, curl, aiohttp,
httpx): keep-alive (HTTP/1.1 default, ``Connection: close`` honoured, HTTP/1.0 closes unless
``keep-alive``), request bodies with ``Content-Length`` or chunked transfer coding,
``Expect: 100-continue``, GET/HEAD/POST routing with 404 and 405 (``Allow``), responses with
``Content-Length`` and streamed responses (:class:`StreamResponse`, chunked on HTTP/1.1) for
SSE. :meth:`HttpServer.unlisten` closes the listener only (new connections are refused) and
drops a kept-alive connection on its next request, as when the server process has died;
:meth:`HttpServer.close` also ends every open connection. The response shapes (status lines,
``Content-Type`` values, ``404: Not Found`` bodies) follow aiohttp's, which served the demo
before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote

__all__ = ["HttpServer", "Request", "Response", "Router", "StreamResponse", "json_response",
           "text_response"]

_log = logging.getLogger(__name__)
_MAX_HEAD = 64 * 1024
_JSON = "application/json; charset=utf-8"
_TEXT = "text/plain; charset=utf-8"


class Request:
    """One parsed request: method, decoded path, raw query string, lower-case headers, body."""

    __slots__ = ("_conn", "body", "headers", "method", "path", "query_string", "transport",
                 "version")

    def __init__(self, method: str, path: str, query_string: str, version: str,
                 headers: dict[str, str], body: bytes, transport: asyncio.BaseTransport):
        self.method = method
        self.path = path
        self.query_string = query_string
        self.version = version
        self.headers = headers
        self.body = body
        self.transport = transport
        self._conn: _Conn | None = None

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(self.query_string, keep_blank_values=True))

    def json(self) -> Any:
        """The body as JSON; raises ``ValueError`` (JSONDecodeError, UnicodeDecodeError)."""
        return json.loads(self.body)


class Response:
    """A whole response, sent with ``Content-Length``."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int = 200, body: bytes = b"", content_type: str | None = None,
                 headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers: dict[str, str] = {}
        if content_type is not None:
            self.headers["Content-Type"] = content_type
        if headers:
            self.headers.update(headers)


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None,
                  dumps: Callable[[Any], str] = json.dumps) -> Response:
    """``obj`` as JSON (``json.dumps``'s default separators unless ``dumps`` is given)."""
    return Response(status, dumps(obj).encode(), _JSON, headers)


def text_response(status: int, text: str, headers: dict[str, str] | None = None) -> Response:
    """``text`` as ``text/plain; charset=utf-8``."""
    return Response(status, text.encode(), _TEXT, headers)


_date_cache: list[Any] = [0, ""]


def _date() -> str:
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0], _date_cache[1] = now, formatdate(now, usegmt=True)
    return _date_cache[1]


def _status_line(version: str, status: int) -> str:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Unknown"
    return f"{version} {status} {phrase}\r\n"


class StreamResponse:
    """A response written piece by piece (SSE): ``await prepare(request)``, then ``write``."""

    __slots__ = ("_chunked", "_transport", "_writer", "headers", "status")

    def __init__(self, status: int = 200, headers: dict[str, str] | None = None):
        self.status = status
        self.headers = dict(headers or {})
        self._writer: asyncio.StreamWriter | None = None
        self._transport: Any = None
        self._chunked = True

    async def prepare(self, request: Request) -> None:
        """Send the status line and headers."""
        conn = request._conn
        assert conn is not None, "prepare() takes a request of this server"
        self._writer = conn.writer
        self._transport = request.transport
        self._chunked = request.version == "HTTP/1.1"
        conn.streamed = self
        head = _status_line(request.version, self.status)
        for k, v in self.headers.items():
            head += f"{k}: {v}\r\n"
        if self._chunked:
            head += "Transfer-Encoding: chunked\r\n"
        if not (self._chunked and conn.keep):
            head += "Connection: close\r\n"
        head += f"Date: {_date()}\r\nServer: llmtop-demo\r\n\r\n"
        await self._send(head.encode("latin-1"))

    async def write(self, data: bytes) -> None:
        """Send ``data``; raises ``ConnectionResetError`` once the client has gone."""
        if data:
            await self._send(b"%x\r\n%b\r\n" % (len(data), data) if self._chunked else data)

    async def _send(self, data: bytes) -> None:
        w = self._writer
        assert w is not None
        if self._transport.is_closing():
            raise ConnectionResetError("Cannot write to closing transport")
        w.write(data)
        await w.drain()

    async def _finish(self) -> None:
        if self._chunked and not self._transport.is_closing():
            self._writer.write(b"0\r\n\r\n")  # type: ignore[union-attr]


Handler = Callable[[Request], Awaitable["Response | StreamResponse"]]


class Router:
    """Exact paths and ``{name}`` patterns to handlers per method; GET routes answer HEAD."""

    def __init__(self) -> None:
        self._exact: dict[str, dict[str, Handler]] = {}
        self._patterns: list[tuple[re.Pattern[str], dict[str, Handler]]] = []

    def add(self, method: str, path: str, handler: Handler) -> None:
        if "{" in path:
            rx = re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) + "$")
            found = next((m for p, m in self._patterns if p.pattern == rx.pattern), None)
            if found is None:
                found = {}
                self._patterns.append((rx, found))
            methods = found
        else:
            methods = self._exact.setdefault(path, {})
        methods[method] = handler
        if method == "GET":
            methods.setdefault("HEAD", handler)

    def add_get(self, path: str, handler: Handler) -> None:
        self.add("GET", path, handler)

    def add_post(self, path: str, handler: Handler) -> None:
        self.add("POST", path, handler)

    def resolve(self, method: str, path: str) -> Handler | Response:
        methods = self._exact.get(path)
        if methods is None:
            methods = next((m for rx, m in self._patterns if rx.match(path)), None)
        if methods is None:
            return text_response(404, "404: Not Found")
        handler = methods.get(method)
        if handler is None:
            allow = ",".join(sorted(methods))
            return text_response(405, "405: Method Not Allowed", {"Allow": allow})
        return handler


class _Conn:
    __slots__ = ("keep", "streamed", "writer")

    def __init__(self, writer: asyncio.StreamWriter, keep: bool):
        self.writer = writer
        self.keep = keep
        self.streamed: StreamResponse | None = None


class _BadRequest(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(text)
        self.status = status
        self.text = text


async def _read_chunked(reader: asyncio.StreamReader, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            n = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest(400, "400: Bad Request") from None
        if n == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        size += n
        if size > limit:
            raise _BadRequest(413, "413: Request Entity Too Large")
        parts.append(await reader.readexactly(n))
        await reader.readexactly(2)


class HttpServer:
    """One router served on one listening socket at a time."""

    def __init__(self, router: Router, *, max_body: int = 64 * 1024 * 1024):
        self.router = router
        self.max_body = max_body
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def listening(self) -> bool:
        return self._server is not None

    async def listen(self, sock: socket.socket) -> None:
        """Serve on ``sock`` (bound, listening, non-blocking)."""
        self._server = await asyncio.start_server(self._serve, sock=sock, limit=_MAX_HEAD)

    def unlisten(self) -> None:
        """Close the listener; open connections are dropped on their next request."""
        if self._server is not None:
            self._server.close()
            self._server = None

    async def close(self) -> None:
        """Close the listener and every open connection (their handlers are cancelled)."""
        self.unlisten()
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:  # asyncio sets it only where sock.proto is IPPROTO_TCP; without
            try:  # it a token's small write waits ~40 ms for the ACK of the one before
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            await self._loop(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass  # close(): the connection task ends here (asyncio's callback reads its result)
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed between requests
            if self._server is None:
                return  # "down": drop a kept-alive connection on its next request
            lines = head[:-4].decode("latin-1").lstrip("\r\n").split("\r\n")
            parts = lines[0].split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                writer.write(self._head("HTTP/1.1", text_response(400, "400: Bad Request"),
                                        False) + b"400: Bad Request")
                return
            method, target, version = parts
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            conn_hdr = headers.get("connection", "").lower()
            keep = (conn_hdr != "close") if version == "HTTP/1.1" else (conn_hdr == "keep-alive")
            try:
                body = await self._body(reader, writer, headers, version)
            except _BadRequest as exc:
                resp = text_response(exc.status, exc.text)
                writer.write(self._head(version, resp, False) + resp.body)
                return
            path, _, query = target.partition("?")
            req = Request(method, unquote(path), query, version, headers, body, transport)
            conn = _Conn(writer, keep)
            req._conn = conn
            resp = await self._dispatch(req)
            if conn.streamed is not None:
                await conn.streamed._finish()
                if not conn.streamed._chunked:
                    return
            elif isinstance(resp, Response):
                if transport.is_closing():
                    return
                data = self._head(version, resp, keep)
                writer.write(data if method == "HEAD" else data + resp.body)
            if not keep or transport.is_closing():
                return
            await writer.drain()

    async def _body(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    headers: dict[str, str], version: str) -> bytes:
        te = headers.get("transfer-encoding", "").lower()
        cl = headers.get("content-length")
        if not te and not cl:
            return b""
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(f"{version} 100 Continue\r\n\r\n".encode())
        if "chunked" in te:
            return await _read_chunked(reader, self.max_body)
        if cl is None or not cl.isdigit():
            raise _BadRequest(400, "400: Bad Request")
        n = int(cl)
        if n > self.max_body:
            raise _BadRequest(413, "413: Request Entity Too Large")
        return await reader.readexactly(n) if n else b""

    async def _dispatch(self, req: Request) -> Response | StreamResponse:
        found = self.router.resolve(req.method, req.path)
        if isinstance(found, Response):
            return found
        try:
            return await found(req)
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception:
            _log.exception("demo handler failed: %s %s", req.method, req.path)
            return text_response(500, "500 Internal Server Error\n\nServer got itself in "
                                 "trouble")

    @staticmethod
    def _head(version: str, resp: Response, keep: bool) -> bytes:
        head = _status_line(version, resp.status)
        for k, v in resp.headers.items():
            head += f"{k}: {v}\r\n"
        head += f"Content-Length: {len(resp.body)}\r\nDate: {_date()}\r\nServer: llmtop-demo\r\n"
        if not keep:
            head += "Connection: close\r\n"
        elif version == "HTTP/1.0":
            head += "Connection: keep-alive\r\n"
        return (head + "\r\n").encode("latin-1")
