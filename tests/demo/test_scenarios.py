"""Each scenario produces the condition llmtop must show."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.demo.conftest import metrics, stream_request


async def poll(fn, timeout: float = 15.0, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        v = await fn()
        if v or time.monotonic() > deadline:
            return v
        await asyncio.sleep(every)


async def test_kv_pressure_preempts_and_retracts(demo_factory):
    server = await demo_factory(("vllm", "sglang"), scenario="kv-pressure", background=True)
    v, g = (es.base_url for es in server.sites)
    async with aiohttp.ClientSession() as s:
        async def check():
            a, b = await metrics(s, v), await metrics(s, g)
            # SGLang's counter is absent until its first retraction, as on the real server
            return (a["vllm:num_preemptions_total"] > 0
                    and b.get("sglang:num_retracted_requests_total", 0) > 0)
        assert await poll(check)
        m = await metrics(s, v)
        assert m["vllm:kv_cache_usage_perc"] > 0.5


async def test_queue_spike_builds_a_queue(demo_factory):
    server = await demo_factory(("vllm",), scenario="queue-spike", background=True)
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:
        async def check():
            return (await metrics(s, base))["vllm:num_requests_waiting"] > 20
        assert await poll(check, timeout=12)


async def test_prefix_thrash_evicts(demo_factory):
    server = await demo_factory(("vllm",), scenario="prefix-thrash", background=True)
    eng = server.sites[0].engine
    assert await poll(lambda: _async(eng.pool.evictions > 0), timeout=15)
    c = eng.stats.c
    assert c["prefix_hits"] < 0.5 * c["prefix_queries"]


async def _async(v):
    return v


async def test_restart_resets_counters_and_start_time(demo_factory):
    server = await demo_factory(("vllm",), scenario="restart", background=True,
                                fault_after=2.0, fault_every=600)
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:
        before = await poll(lambda: _gen(s, base), timeout=1.8)
        assert before
        t1 = (await metrics(s, base))["process_start_time_seconds"]

        async def changed():
            m = await metrics(s, base)
            return m if m["process_start_time_seconds"] != t1 else None
        after = await poll(changed, timeout=5, every=0.05)
    assert after is not None
    assert after["process_start_time_seconds"] > t1
    assert after["vllm:generation_tokens_total"] < before


async def _gen(s, base):
    m = await metrics(s, base)
    return m["vllm:generation_tokens_total"] if m["vllm:generation_tokens_total"] > 200 else 0


async def test_down_refuses_connections(demo_factory):
    server = await demo_factory(("vllm", "sglang"), scenario="down", fault_after=0.3,
                                fault_every=600)
    v, g = (es.base_url for es in server.sites)
    await asyncio.sleep(0.8)
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientConnectorError):
            await s.get(v + "/metrics")
        async with s.get(g + "/metrics") as r:  # the other engine is fine
            assert r.status == 200


async def test_down_drops_kept_alive_connections(demo_factory):
    server = await demo_factory(("vllm",), scenario="down", fault_after=0.5, fault_every=600)
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:  # one pooled keep-alive connection
        async with s.get(base + "/metrics") as r:
            assert r.status == 200
            await r.read()
        await asyncio.sleep(0.9)
        with pytest.raises(aiohttp.ClientError):
            async with s.get(base + "/metrics") as r:
                await r.read()


async def test_down_comes_back(demo_factory):
    server = await demo_factory(("vllm",), scenario="down", fault_after=0.2, fault_every=0.6)
    base = server.sites[0].base_url
    await asyncio.sleep(1.2)
    async with aiohttp.ClientSession() as s, s.get(base + "/metrics") as r:
        assert r.status == 200


async def test_garbage_is_200_and_not_prometheus(demo_factory):
    server = await demo_factory(("vllm", "sglang"), scenario="garbage")
    v, g = (es.base_url for es in server.sites)
    async with aiohttp.ClientSession() as s:
        async with s.get(v + "/metrics") as r:
            assert r.status == 200
            body = await r.read()
        assert b"<html" not in body.lower()
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(body.decode(errors="replace")))
        await metrics(s, g)


async def test_slow_metrics_past_scrape_timeout(demo_factory):
    server = await demo_factory(("vllm",), scenario="slow")
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:
        t0 = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            async with s.get(base + "/metrics", timeout=aiohttp.ClientTimeout(total=2.0)):
                pass
        assert time.monotonic() - t0 >= 1.9
        res = await stream_request(s, base, max_tokens=3)  # the API still works
        assert res["done"]


async def test_shared_prefix_hits_rise_and_ttft_falls(demo_factory):
    server = await demo_factory(("vllm",))
    base = server.sites[0].base_url
    prefixes = [" ".join(f"p{k}w{i}" for i in range(1800)) for k in range(3)]
    cold, warm = [], []
    async with aiohttp.ClientSession() as s:
        hits0 = (await metrics(s, base))["vllm:prefix_cache_hits_total"]
        for rnd in range(4):
            for k, p in enumerate(prefixes):
                res = await stream_request(s, base, prompt=f"{p} q{rnd} z{k}", max_tokens=2)
                (cold if rnd == 0 else warm).append(res["ttft"])
        m = await metrics(s, base)
    assert m["vllm:prefix_cache_hits_total"] > hits0 + 9 * 1700
    cold.sort()
    warm.sort()
    assert warm[len(warm) // 2] < 0.6 * cold[len(cold) // 2]
