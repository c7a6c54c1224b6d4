"""The fleet client over real sockets (``http://`` goes over ``sources/plainhttp.py``): a
closed port, a server that never answers, an HTML page, a body cut short. Each is a
``PromError`` the header and ``--once`` name, never a traceback."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest

from llmtop.config import PrometheusConfig
from llmtop.sources.prometheus import PromClient, PromError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _ask(handler: Handler | None, timeout_s: float = 1.0) -> PromError:
    server = None
    if handler is None:  # a port nobody listens on
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
    else:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    client = PromClient(PrometheusConfig(url=f"http://127.0.0.1:{port}", timeout_s=timeout_s))
    try:
        with pytest.raises(PromError) as info:
            await client.query("up", 1.0)
        return info.value
    finally:
        await client.aclose()
        if server is not None:
            server.close()
            await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return await reader.readexactly(length)


def test_closed_port_is_unreachable():
    err = asyncio.run(_ask(None))
    assert err.kind == "unreachable" and "connection refused" in err.message, err.message


def test_a_server_that_never_answers_times_out():
    async def silent(reader, writer):
        await _read_request(reader)
        await asyncio.sleep(5)

    err = asyncio.run(_ask(silent, timeout_s=0.5))
    assert err.kind == "unreachable" and "timed out after 0.5 s" in err.message


def test_html_from_a_proxy_is_a_bad_payload_and_the_query_arrived_as_a_form():
    seen: list[bytes] = []

    async def html(reader, writer):
        seen.append(await _read_request(reader))
        body = b"<!doctype html><html><body>Sign in</body></html>"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    err = asyncio.run(_ask(html))
    assert err.kind == "bad_payload" and "HTML" in err.message
    assert seen and b"query=up" in seen[0] and b"time=1" in seen[0]


def test_a_body_cut_short_is_an_error_state():
    async def cut(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"status\":\"success\",\"data\":{\"res")
        await writer.drain()
        writer.close()

    err = asyncio.run(_ask(cut))
    assert err.kind in ("unreachable", "bad_payload"), err
