"""The demo's stdlib HTTP/1.1 server (llmtop/demo/httpd.py) on raw sockets: keep-alive,
request bodies (Content-Length, chunked), HEAD, 404/405, chunked streaming, HTTP/1.0, close."""

from __future__ import annotations

import asyncio
import socket

import pytest

from llmtop.demo.httpd import HttpServer, Request, Response, Router, StreamResponse, json_response


async def _echo(req: Request) -> Response:
    return json_response({"method": req.method, "path": req.path, "query": req.query,
                          "body": req.body.decode()})


async def _stream(req: Request) -> StreamResponse:
    resp = StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    await resp.prepare(req)
    for i in range(3):
        await resp.write(f"data: {i}\n\n".encode())
    return resp


async def _nodelay(req: Request) -> Response:
    sock = req.transport.get_extra_info("socket")
    return json_response(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


@pytest.fixture
async def server():
    r = Router()
    r.add_get("/get", _echo)
    r.add_post("/post", _echo)
    r.add_post("/stream", _stream)
    r.add_get("/m/{name}/ready", _echo)
    r.add_get("/nodelay", _nodelay)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # proto 0, as demo/server.py binds
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    srv = HttpServer(r, max_body=1000)
    await srv.listen(s)
    yield srv, s.getsockname()[1]
    await srv.close()


async def _read_response(reader: asyncio.StreamReader, head_only: bool = False
                         ) -> tuple[str, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
    if head_only:
        return lines[0], headers, b""
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            n = int((await reader.readuntil(b"\r\n")).strip(), 16)
            chunk = await reader.readexactly(n + 2)
            if n == 0:
                return lines[0], headers, body
            body += chunk[:-2]
    n = int(headers.get("content-length", "0"))
    return lines[0], headers, await reader.readexactly(n)


async def test_keep_alive_bodies_and_errors(server):
    _srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /get?a=1&b= HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"POST /post HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                 b"POST /post HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                 b"HEAD /get HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /post HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /m/abc/ready HTTP/1.1\r\nHost: x\r\n\r\n")
    status, h, body = await _read_response(reader)
    assert status == "HTTP/1.1 200 OK" and h["content-type"] == "application/json; charset=utf-8"
    assert body == b'{"method": "GET", "path": "/get", "query": {"a": "1", "b": ""}, "body": ""}'
    assert "connection" not in h  # kept alive
    assert (await _read_response(reader))[2].endswith(b'"body": "hello"}')
    assert (await _read_response(reader))[2].endswith(b'"body": "abcde"}')
    status, h, _ = await _read_response(reader, head_only=True)
    assert status == "HTTP/1.1 200 OK" and int(h["content-length"]) > 0  # no body follows
    status, h, body = await _read_response(reader)
    assert (status, body) == ("HTTP/1.1 404 Not Found", b"404: Not Found")
    status, h, body = await _read_response(reader)
    assert (status, h["allow"], body) == ("HTTP/1.1 405 Method Not Allowed", "POST",
                                          b"405: Method Not Allowed")
    status, _h, body = await _read_response(reader)
    assert status == "HTTP/1.1 200 OK" and b'"path": "/m/abc/ready"' in body
    writer.close()


async def test_stream_is_chunked_then_connection_stays_open(server):
    _srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(2):
        writer.write(b"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        status, h, body = await _read_response(reader)
        assert status == "HTTP/1.1 200 OK" and h["transfer-encoding"] == "chunked"
        assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"
    writer.close()


async def test_http10_and_connection_close_end_the_connection(server):
    _srv, port = server
    for req, version in ((b"GET /get HTTP/1.0\r\n\r\n", "HTTP/1.0"),
                         (b"GET /get HTTP/1.1\r\nConnection: close\r\n\r\n", "HTTP/1.1"),
                         (b"POST /stream HTTP/1.0\r\nContent-Length: 0\r\n\r\n", "HTTP/1.0")):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(req)
        data = await asyncio.wait_for(reader.read(), 5)  # EOF: the server closed
        assert data.startswith(f"{version} 200 OK".encode()), data
        assert b"\r\nConnection: close\r\n" in data
        writer.close()


async def test_body_too_large_is_413(server):
    _srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /post HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")
    data = await asyncio.wait_for(reader.read(), 5)
    assert data.startswith(b"HTTP/1.1 413 ")
    writer.close()


async def test_unlisten_refuses_new_and_drops_kept_alive(server):
    srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /get HTTP/1.1\r\n\r\n")
    assert (await _read_response(reader))[0] == "HTTP/1.1 200 OK"
    srv.unlisten()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /get HTTP/1.1\r\n\r\n")
    assert await asyncio.wait_for(reader.read(), 5) == b""  # dropped, no answer
    writer.close()


async def test_close_ends_open_connections(server):
    srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /get HTTP/1.1\r\n\r\n")
    await _read_response(reader)
    await srv.close()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_tcp_nodelay_is_set(server):
    # without it, a kept-alive stream's small writes wait for delayed ACKs (~40 ms each)
    _srv, port = server
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /nodelay HTTP/1.1\r\n\r\n")
    _status, _h, body = await _read_response(reader)
    assert body != b"0"
    writer.close()
