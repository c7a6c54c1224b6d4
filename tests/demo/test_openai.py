"""OpenAI-compatible API of the demo engines: SSE shape, usage, [DONE], max_tokens, errors."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from tests.demo.conftest import stream_request


@pytest.mark.parametrize("chat", [False, True])
async def test_stream_shape_and_exact_max_tokens(demo_factory, chat):
    server = await demo_factory(("vllm",))
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:
        res = await stream_request(s, base, chat=chat, prompt="one two three four", max_tokens=37)
    ev = res["events"]
    assert res["done"]
    assert len(res["text"].split()) == 37
    usage = ev[-1]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 4, "total_tokens": 41, "completion_tokens": 37}
    last = ev[-2]["choices"][0]
    assert last["finish_reason"] == "length"
    if chat:
        assert ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert all(e["object"] == "chat.completion.chunk" for e in ev)
    else:
        assert all(e["object"] == "text_completion" for e in ev)
    assert len({e["id"] for e in ev}) == 1


async def test_no_usage_chunk_without_include_usage(demo_factory):
    server = await demo_factory(("sglang",))
    async with aiohttp.ClientSession() as s:
        res = await stream_request(s, server.sites[0].base_url, max_tokens=3,
                                   include_usage=False)
    assert res["done"] and all(e["choices"] for e in res["events"])


async def test_without_ignore_eos_may_stop_early(demo_factory):
    server = await demo_factory(("vllm",))
    base = server.sites[0].base_url
    reasons = set()
    async with aiohttp.ClientSession() as s:
        for _ in range(5):
            async with s.post(base + "/v1/completions",
                              json={"prompt": "x y", "max_tokens": 250}) as r:
                body = await r.json()
            n = body["usage"]["completion_tokens"]
            reason = body["choices"][0]["finish_reason"]
            assert len(body["choices"][0]["text"].split()) == n <= 250
            assert reason == ("length" if n == 250 else "stop")
            reasons.add(reason)
    assert "stop" in reasons


async def test_identity_endpoints(demo_factory):
    server = await demo_factory()
    v, g, t = (es.base_url for es in server.sites)
    async with aiohttp.ClientSession() as s:
        async with s.get(v + "/version") as r:
            assert await r.json() == {"version": "0.33.0"}
        async with s.post(v + "/tokenize", json={"prompt": "a b  c"}) as r:
            tok = await r.json()
        assert tok["count"] == 3 and len(tok["tokens"]) == 3 and tok["max_model_len"] == 2048
        for base, owner in ((v, "vllm"), (g, "sglang"), (t, "tensorrt_llm")):
            async with s.get(base + "/v1/models") as r:
                assert (await r.json())["data"][0]["owned_by"] == owner
        for url in (v + "/health", g + "/health", t + "/v2/health/ready"):
            async with s.get(url) as r:
                assert r.status == 200
        async with s.get(t + "/v2") as r:
            assert (await r.json())["name"] == "triton"
        async with s.get(g + "/server_info") as r:
            assert (await r.json())["max_running_requests"] == 48
        async with s.get(g + "/v1/loads") as r:
            assert "loads" in await r.json()
        async with s.post(v + "/v1/completions", json={"prompt": "a", "model": "nope"}) as r:
            assert r.status == 404
        async with s.post(v + "/v1/completions",
                          json={"prompt": "a " * 2000, "max_tokens": 100}) as r:
            assert r.status == 400


async def test_triton_rejects_with_503_at_capacity(demo_factory):
    server = await demo_factory(("triton",))
    base = server.sites[0].base_url
    statuses: list[int] = []
    retry_after: set[str] = set()

    async def one(s):
        async with s.post(base + "/v1/completions",
                          json={"prompt": "p " * 50, "max_tokens": 200, "ignore_eos": True,
                                "stream": True}) as r:
            statuses.append(r.status)
            if r.status == 503:
                retry_after.add(r.headers.get("Retry-After", ""))
            else:
                await r.content.readany()

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*(one(s) for _ in range(130)))
    assert 503 in statuses and 200 in statuses
    assert retry_after == {"1"}
    assert 32 <= statuses.count(200) <= 64 + 32  # at most max batch + queue
