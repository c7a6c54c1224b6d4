"""The hot path: SSE splitting, usage styles, and every error class."""

from __future__ import annotations

import itertools
import json
import socket

import pytest

from llmtop.loadgen.client import Result, StreamClient, parse_retry_after
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.prompts import Calibration, PromptFactory
from llmtop.loadgen.rawhttp import RawStreamClient

from .conftest import probe


class _Content:
    def __init__(self, chunks):
        self.chunks = chunks

    async def iter_any(self):
        for c in self.chunks:
            yield c


def _ev(text=None, usage=None, finish=None, chat=False, choices=True):
    obj: dict = {"choices": []}
    if choices:
        c = {"index": 0, "finish_reason": finish}
        if chat:
            c["delta"] = {"content": text} if text is not None else {"role": "assistant"}
        else:
            c["text"] = text or ""
        obj["choices"] = [c]
    if usage:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": usage}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _read(chunks):
    r = Result(0.0)
    await StreamClient._read_stream(_Content(chunks), r)
    return r


async def test_vllm_style_usage_chunk_and_split_events():
    body = (_ev(chat=True) + _ev("a", chat=True) + _ev("b", chat=True)
            + _ev("", finish="length", chat=True) + _ev(usage=5, choices=False)
            + b"data: [DONE]\n\n")
    # split at awkward places, including inside an event and between the two newlines
    chunks = [body[:7], body[7:60], body[60:61], body[61:200], body[200:]]
    r = await _read(chunks)
    assert r.ok and r.n_content == 2 and r.output_tokens == 5 and r.prompt_tokens == 7
    assert len(r.gaps) == 1


async def test_llamacpp_usage_on_last_choice_chunk_and_crlf():
    body = _ev("x") + _ev("y") + _ev("", finish="length", usage=2) + b"data: [DONE]\n\n"
    body = body.replace(b"\n", b"\r\n")
    r = await _read([body[:30], body[30:31], body[31:]])
    assert r.ok and r.output_tokens == 2 and r.n_content == 2


async def test_no_usage_counts_content_events_and_ignores_comments():
    body = b": keep-alive\n\n" + _ev("x") + b"event: ping\ndata: " + _ev("y")[6:] + \
        _ev("", finish="stop")
    r = await _read([body])
    assert r.ok and r.output_tokens == 2


async def test_truncated_and_malformed():
    r = await _read([_ev("x") + _ev("y")])
    assert r.error == "truncated_stream"
    r = await _read([_ev("x") + b"data: {not json\n\n" + _ev("y")])
    assert r.error == "malformed_event"


def test_parse_retry_after():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("soon") is None


@pytest.mark.parametrize("cls", [StreamClient, RawStreamClient])
async def test_connection_refused_is_connect(cls):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    c = cls(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    try:
        r = await c.request(b"{}")
    finally:
        await c.aclose()
    assert r.error == "connect"


def _opts(url, model, **kw):
    base = {"concurrency": 2, "max_requests": 6, "output_tokens": 8, "prompt_tokens": 16,
            "endpoint": "completions", "progress_interval": 0.2}
    base.update(kw)
    return ProbeOptions(url=url, model=model, **base)


@pytest.mark.parametrize("client", ["raw", "aiohttp"])
@pytest.mark.parametrize(("model", "cls"), [("fail-close", "truncated_stream"),
                                            ("fail-malformed", "malformed_event"),
                                            ("fail-503", "http_503")])
async def test_error_classes_in_a_run(fast_mock, model, cls, client):
    report, _ = await probe(_opts(fast_mock.url, model, max_error_rate=1.0, client=client))
    step = report["steps"][0]
    assert step["errors"].get(cls, 0) >= 1, step["errors"]
    assert step["requests"] == 0


async def test_429_retry_after_honoured_and_counted(fast_mock):
    import httpx

    # the first 3 requests of this model get 429 + Retry-After: 0.5 (the prepare probe is 1)
    report, _ = await probe(_opts(fast_mock.url, "fail-429-3", concurrency=1, max_requests=5,
                                  max_error_rate=1.0))
    step = report["steps"][0]
    assert step["errors"] == {"http_429": 2}
    assert step["requests"] == 3
    assert step["retry_after"]["count"] == 2
    assert step["retry_after"]["wait_s"] >= 0.9
    async with httpx.AsyncClient() as c:
        arrivals = (await c.get(fast_mock.url + "/stats")).json()["arrivals"]["fail-429-3"]
    gaps = [b - a for a, b in itertools.pairwise(arrivals[1:])]
    assert gaps[0] >= 0.45 and gaps[1] >= 0.45  # waited Retry-After before the next send


async def test_connection_refused_run_counts_connect_and_stops_on_error_rate():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    report, _ = await probe(_opts(f"http://127.0.0.1:{port}", "m", concurrency=4,
                                       max_requests=None, duration=5.0, max_error_rate=0.5))
    step = report["steps"][0]
    assert step["errors"].get("connect", 0) >= 20
    assert report["stop_reason"] == "error_rate"


def test_prompt_factory_lengths_and_prefixes():
    cal = Calibration("tokenize", ratio=1.25, overhead=1)
    f = PromptFactory(model="m", endpoint="chat", calibration=cal, prompt_tokens=101,
                      output_tokens=10, shared_prefix=(2, 41))
    a, b, c = f.text(), f.text(), f.text()
    assert a.split("\n")[0] != b.split("\n")[0] and a.split("\n")[0] == c.split("\n")[0]
    assert len(a.split("\n")[1].split()) == 2 + cal.words_for(101)
    body = json.loads(f.payload("hi", 5))
    assert body["messages"][0]["content"] == "hi" and body["ignore_eos"] is True
    assert body["stream_options"] == {"include_usage": True}


async def _serve_once(response: bytes):
    """A one-shot server that answers any request with ``response`` and closes."""
    import asyncio

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(response)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("framing", ["length", "close", "chunked-split"])
async def test_raw_client_body_framings(framing):
    body = _ev("a") + _ev("b") + _ev("", finish="length", usage=2) + b"data: [DONE]\n\n"
    if framing == "length":
        resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    elif framing == "close":
        resp = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body
    else:
        resp = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7])
                           for i in range(0, len(body), 7)) + b"0\r\n\r\n")
    server, port = await _serve_once(resp)
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    try:
        r = await c.request(b"{}")
    finally:
        await c.aclose()
        server.close()
    assert r.ok, r.error
    assert r.n_content == 2 and r.output_tokens == 2 and len(r.gaps) == 1


async def test_raw_client_429_retry_after_and_truncation():
    server, port = await _serve_once(b"HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\n"
                                     b"Content-Length: 2\r\n\r\n{}")
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    r = await c.request(b"{}")
    server.close()
    assert r.error == "http_429" and r.retry_after == 3.0
    server, port = await _serve_once(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                     + b"%x\r\n%s\r\n" % (len(_ev("a")), _ev("a")))
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    r = await c.request(b"{}")
    await c.aclose()
    server.close()
    assert r.error == "truncated_stream" and r.t_first is not None


def _one_answer_per_connection(served: list[int]):
    """A server that answers a connection's first request and hangs up on its second,
    unanswered: every kept-alive connection is stale by its second request."""
    import asyncio

    body = _ev("a") + _ev("", finish="length") + b"data: [DONE]\n\n"
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def handle(reader, writer):
        n = 0
        while True:
            try:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            n += 1
            if n == 2:
                break
            writer.write(ok)
            served.append(1)
            await writer.drain()
        writer.close()

    return handle


async def test_raw_client_replaces_a_stale_keepalive_connection():
    import asyncio

    served: list[int] = []
    server = await asyncio.start_server(_one_answer_per_connection(served), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    try:
        r1 = await c.request(b"{}")
        r2 = await c.request(b"{}")
    finally:
        await c.aclose()
        server.close()
    assert r1.ok and r2.ok, (r1.error, r2.error)
    assert len(served) == 2


async def test_raw_client_retries_on_a_new_connection_when_the_whole_pool_is_stale():
    """Two kept-alive connections idle past the server's keep-alive timeout (llama-server:
    5 s): the retry must not take the other stale one from the pool (a real llama-server run
    counted 2 of 8 requests as connect errors so)."""
    import asyncio

    served: list[int] = []
    server = await asyncio.start_server(_one_answer_per_connection(served), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=5)
    try:
        first = await asyncio.gather(c.request(b"{}"), c.request(b"{}"))  # two pooled conns
        second = [await c.request(b"{}")]  # one request, two stale connections in the pool
    finally:
        await c.aclose()
        server.close()
    assert all(r.ok for r in first), [r.error for r in first]
    assert all(r.ok for r in second), [r.error for r in second]
    assert len(served) == 3, [(r.ok, r.error) for r in second]


async def test_raw_client_read_timeout_on_a_stalled_stream():
    import asyncio

    async def handle(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + b"%x\r\n%s\r\n" % (len(_ev("a")), _ev("a")))
        await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    c = RawStreamClient(f"http://127.0.0.1:{port}/v1/completions", timeout_s=30,
                        read_timeout_s=0.5)
    try:
        r = await asyncio.wait_for(c.request(b"{}"), 4)
    finally:
        await c.aclose()
        server.close()
    assert r.error == "timeout" and r.t_first is not None
