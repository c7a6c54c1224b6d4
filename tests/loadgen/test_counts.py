"""Counts that add up: what the probe counts against what a server received and sent.

The mock server (``mock_server.py``) counts the streams it was asked for, those it wrote to
the end, and every content event it wrote (its ``vllm:generation_tokens_total``).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from llmtop.loadgen.rawhttp import RawStreamClient

from .mock_server import start_mock


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/stats", timeout=10).json()


def _body(tokens: int) -> bytes:
    return json.dumps({"model": "mock-model", "prompt": "hi", "max_tokens": tokens,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()


@pytest.fixture(scope="module")
def late_crlf_mock():
    """A server that writes a chunked stream's final CRLF alone, 50 ms late, then closes the
    connection: what the real llama-server does."""
    with start_mock(late_crlf=0.05, metrics=True) as m:
        yield m


async def test_a_late_final_crlf_is_not_the_next_response(late_crlf_mock):
    """llama-server's one-request-short: the final CRLF of a stream came after the client had
    reused the connection; it was read as the start of the next response, the server then
    closed and the request counted as a ``connect`` error (1 in 5 runs of 8 requests)."""
    url = late_crlf_mock.url
    before = _stats(url)
    c = RawStreamClient(f"{url}/v1/completions", timeout_s=10)

    async def worker() -> list:
        return [await c.request(_body(16)) for _ in range(6)]

    try:
        results = [r for rs in await asyncio.gather(worker(), worker()) for r in rs]
    finally:
        await c.aclose()
    after = _stats(url)
    assert [r.error for r in results if r.error] == []
    assert sum(r.tokens for r in results) == 12 * 16
    # the server received each request once (no retry sent one twice) and finished each
    assert after["streams"] - before["streams"] == 12
    assert after["streams_done"] - before["streams_done"] == 12
    assert after["tokens"] - before["tokens"] == 12 * 16
