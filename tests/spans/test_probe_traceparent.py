"""The probe's requests carry a traceparent with the probe's trace id (loadgen clients)."""

from __future__ import annotations

import asyncio

from llmtop.loadgen.rawhttp import RawStreamClient
from llmtop.model.request_records import source_of


async def _head_of_one_request() -> bytes:
    got: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.append(await reader.readuntil(b"\r\n\r\n"))
        body = b"data: [DONE]\n\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    try:
        await client.request(b"{}")
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
    return got[0]


def test_the_raw_client_sends_the_probe_trace_id():
    head = asyncio.run(_head_of_one_request()).decode("latin-1")
    [line] = [x for x in head.split("\r\n") if x.lower().startswith("traceparent:")]
    trace = line.split(":", 1)[1].strip().split("-")[1]
    assert source_of(trace) == "probe"
