"""PlainHTTPTransport: HTTP/1.1 framing, keep-alive and errors, against raw loopback servers."""

from __future__ import annotations

import asyncio
import gzip
import socket

import httpx
import pytest

from llmtop.sources.plainhttp import PlainHTTPTransport
from tests.sources.helpers import free_port, raw_server

pytestmark = pytest.mark.asyncio


async def _read_request(r: asyncio.StreamReader) -> bytes:
    """One request head (GET/HEAD: no body)."""
    return await r.readuntil(b"\r\n\r\n")


def _client(tr: PlainHTTPTransport, **kw) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=tr, timeout=kw.pop("timeout", 2.0), **kw)


async def test_content_length_bodies_reuse_one_connection():
    heads: list[bytes] = []

    async def serve(r, w):
        while True:
            heads.append(await _read_request(r))
            body = b"x" * (1000 + len(heads))
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            await w.drain()

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr) as c:
        sizes = [len((await c.get(f"http://127.0.0.1:{port}/metrics?a=1")).content)
                 for _ in range(3)]
    assert sizes == [1001, 1002, 1003]
    assert tr.connects == 1
    assert heads[0].startswith(b"GET /metrics?a=1 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:%d\r\n" % port in heads[0]


async def test_chunked_body_split_across_writes_with_extensions_and_trailers():
    async def serve(r, w):
        while True:
            await _read_request(r)
            w.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel")
            await w.drain()
            await asyncio.sleep(0.02)
            w.write(b"lo\r\n6\r\n world\r")
            await w.drain()
            await asyncio.sleep(0.02)
            w.write(b"\n0\r\nX-Trailer: yes\r\n\r\n")
            await w.drain()

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr) as c:
        a = await c.get(f"http://127.0.0.1:{port}/")
        b = await c.get(f"http://127.0.0.1:{port}/")
    assert a.text == b.text == "hello world"
    assert tr.connects == 1


async def test_body_delimited_by_close_and_http10_are_not_reused():
    async def serve(r, w):
        await _read_request(r)
        w.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end")
        await w.drain()
        w.close()

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr) as c:
        texts = [(await c.get(f"http://127.0.0.1:{port}/")).text for _ in range(2)]
    assert texts == ["until the end"] * 2
    assert tr.connects == 2


@pytest.mark.parametrize("reply", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly 20 bytes here..",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nshort",
])
async def test_body_cut_short_is_a_remote_protocol_error(reply):
    async def serve(r, w):
        await _read_request(r)
        w.write(reply)
        await w.drain()
        w.close()

    async with raw_server(serve) as port, _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.RemoteProtocolError, match="complete message body"):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_kept_alive_connection_closed_by_the_server_is_retried_once():
    conns = 0

    async def serve(r, w):
        nonlocal conns
        conns += 1
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await w.drain()
        if conns == 1:
            await _read_request(r)  # the second request arrives: hang up without answering
            w.transport.abort()

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr) as c:
        first = await c.get(f"http://127.0.0.1:{port}/")
        second = await c.get(f"http://127.0.0.1:{port}/")
    assert (first.text, second.text) == ("ok", "ok")
    assert tr.connects == 2


async def test_server_that_never_answers_is_disconnected_error():
    async def serve(r, w):
        await _read_request(r)
        w.close()

    async with raw_server(serve) as port, _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected without"):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_non_http_answer_fails_at_once_not_at_the_timeout():
    async def serve(r, w):
        w.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await w.drain()
        await asyncio.sleep(5)

    async with raw_server(serve) as port, _client(PlainHTTPTransport(), timeout=3.0) as c:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(httpx.RemoteProtocolError, match="illegal status line"):
            await c.get(f"http://127.0.0.1:{port}/")
        assert loop.time() - t0 < 1.0


async def test_interim_100_is_skipped_and_head_204_have_no_body():
    async def serve(r, w):
        while True:
            head = await _read_request(r)
            if head.startswith(b"HEAD"):
                w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n")
            elif b"/empty" in head:
                w.write(b"HTTP/1.1 204 No Content\r\n\r\n")
            else:
                w.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3"
                        b"\r\n\r\nyes")
            await w.drain()

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr) as c:
        url = f"http://127.0.0.1:{port}"
        got = await c.get(url + "/")
        head = await c.head(url + "/")
        empty = await c.get(url + "/empty")
        again = await c.get(url + "/")
    assert (got.status_code, got.text) == (200, "yes")
    assert (head.status_code, head.content, head.headers["content-length"]) == (200, b"", "50")
    assert (empty.status_code, empty.content) == (204, b"")
    assert again.text == "yes"
    assert tr.connects == 1


async def test_read_timeout_when_the_body_stalls():
    async def serve(r, w):
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await w.drain()
        await asyncio.sleep(5)

    async with raw_server(serve) as port, _client(PlainHTTPTransport(), timeout=0.3) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_connection_refused_keeps_the_os_error_as_cause():
    async with _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.get(f"http://127.0.0.1:{free_port()}/")
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


async def test_localhost_name_refused_on_every_address_is_still_refused():
    port = free_port()
    if not socket.getaddrinfo("localhost", port):  # pragma: no cover
        pytest.skip("localhost does not resolve")
    async with _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.ConnectError) as info:
            await c.get(f"http://localhost:{port}/")
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


async def test_large_body_arrives_whole_through_flow_control():
    body = bytes(range(256)) * (5 * 4096)  # 5 MiB, past the 1 MiB read pause

    async def serve(r, w):
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        for i in range(0, len(body), 65536):
            w.write(body[i:i + 65536])
            await w.drain()

    async with raw_server(serve) as port, _client(PlainHTTPTransport()) as c:
        got = bytearray()
        async with c.stream("GET", f"http://127.0.0.1:{port}/") as resp:
            async for chunk in resp.aiter_bytes():
                got += chunk
                await asyncio.sleep(0)  # a slow reader
    assert bytes(got) == body


async def test_cancelled_request_closes_its_connection():
    async def serve(r, w):
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        await w.drain()
        await asyncio.sleep(5)

    tr = PlainHTTPTransport()
    async with raw_server(serve) as port, _client(tr, timeout=10) as c:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.get(f"http://127.0.0.1:{port}/"), 0.2)
        assert not tr._busy
        assert not any(tr._idle.values())


async def test_gzip_body_is_decoded_by_httpx_above_the_transport():
    body = gzip.compress(b"vllm:num_requests_running 3\n")

    async def serve(r, w):
        await _read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
                % len(body) + body)
        await w.drain()

    async with raw_server(serve) as port, _client(PlainHTTPTransport()) as c:
        resp = await c.get(f"http://127.0.0.1:{port}/")
    assert resp.text == "vllm:num_requests_running 3\n"


@pytest.mark.parametrize("reply, match", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nbad header line\r\n\r\n", "malformed header"),
    (b"HTTP/1.1 2xx OK\r\n\r\n", "illegal status line"),
])
async def test_malformed_heads_are_protocol_errors(reply, match):
    async def serve(r, w):
        await _read_request(r)
        w.write(reply)
        await w.drain()
        await asyncio.sleep(1)

    async with raw_server(serve) as port, _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.RemoteProtocolError, match=match):
            await c.get(f"http://127.0.0.1:{port}/")


async def test_header_with_a_line_break_is_refused_before_sending():
    async with _client(PlainHTTPTransport()) as c:
        with pytest.raises(httpx.LocalProtocolError):
            await c.get(f"http://127.0.0.1:{free_port()}/", headers={"X-A": "a\r\nX-B: b"})
