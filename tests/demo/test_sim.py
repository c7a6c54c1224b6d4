"""The simulation without HTTP: KV pool, prefix cache, preemption, rejection, GPU."""

from __future__ import annotations

import asyncio

import pytest

from llmtop.demo import formats_vllm
from llmtop.demo.gpu import SimGpu
from llmtop.demo.profiles import DEFAULT_PROFILE, engine_settings
from llmtop.demo.sim import Engine, KVPool, Rejected, prompt_hashes


def test_kvpool_prefix_reuse_and_lru_eviction():
    p = KVPool(4, 16)
    a, b = prompt_hashes([f"a{i}" for i in range(32)], 16), prompt_hashes(
        [f"b{i}" for i in range(32)], 16)
    assert p.take(2)
    assert p.promote(a[0]) and p.promote(a[1])
    p.release(0, a)  # finished: cached, evictable
    assert p.used == 0 and p.available() == 4 and p.match(a) == 2
    assert p.take(3)  # needs one of the cached blocks: evicts the LRU one
    assert p.evictions == 1 and p.match(a) == 0 and p.match(b) == 0
    assert not p.take(2)


def test_prompt_hashes_are_chained():
    w = [str(i) for i in range(48)]
    h1 = prompt_hashes(w, 16)
    h2 = prompt_hashes(["x", *w[1:]], 16)
    assert len(h1) == 3 and h1[0] != h2[0] and h1[2] != h2[2]


def _engine(kind="vllm", **changes):
    return Engine(kind, engine_settings(kind, **changes), DEFAULT_PROFILE,
                  formats_vllm.HIST_BOUNDS, seed=1)


async def _drain(e, reqs, timeout=20.0):
    async def wait():
        for r in reqs:
            while not r.done:
                await r.wait()
    await asyncio.wait_for(wait(), timeout)


async def test_vllm_preempts_when_kv_runs_out():
    e = _engine(num_gpu_blocks=64)  # 1024 tokens
    e.start()
    try:
        reqs = [e.submit([f"w{k}x{i}" for i in range(200)], 150, ignore_eos=True)
                for k in range(6)]
        await _drain(e, reqs)
    finally:
        await e.close()
    assert e.stats.c["preemptions"] > 0
    assert all(r.output == 150 and r.finish_reason == "length" for r in reqs)
    assert e.pool.used == 0 and e.pool.available() == e.pool.total  # no leaked blocks


async def test_sglang_retracts_instead():
    e = Engine("sglang", engine_settings("sglang", num_gpu_blocks=64), DEFAULT_PROFILE,
               formats_vllm.HIST_BOUNDS, seed=1)
    e.start()
    try:
        reqs = [e.submit([f"w{k}x{i}" for i in range(200)], 150, ignore_eos=True)
                for k in range(6)]
        await _drain(e, reqs)
    finally:
        await e.close()
    assert e.stats.c["retracted"] > 0 and e.stats.c["preemptions"] == 0


async def test_triton_reserves_and_rejects_never_preempts():
    e = _engine("triton", num_gpu_blocks=12, max_queue=2)  # 12 x 64 tokens
    e.start()
    try:
        reqs = [e.submit(["w"] * 100, 300, ignore_eos=True) for _ in range(2)]
        await asyncio.sleep(0.05)  # 7 blocks each, 12 in the pool: one runs, one waits
        assert len(e.running) == 1 and len(e.waiting) == 1
        reqs.append(e.submit(["w"] * 100, 300, ignore_eos=True))
        with pytest.raises(Rejected):
            e.submit(["w"] * 100, 300, ignore_eos=True)
        await _drain(e, reqs)
    finally:
        await e.close()
    assert e.stats.c["preemptions"] == 0 and e.stats.c["rejected"] == 1
    assert e.pool.used == 0 and e.pool.available() == e.pool.total


async def test_shared_prefix_counts_hits():
    e = _engine()
    e.start()
    try:
        prefix = [f"s{i}" for i in range(512)]
        first = e.submit([*prefix, "q0"], 4, ignore_eos=True)
        await _drain(e, [first])
        later = [e.submit([*prefix, f"q{k}"], 4, ignore_eos=True) for k in range(1, 4)]
        await _drain(e, later)
    finally:
        await e.close()
    assert e.stats.c["prefix_hits"] == 3 * 512
    assert e.stats.c["prefix_queries"] == 4 * 513


def test_gpu_power_cap_under_sustained_load(monkeypatch):
    e = _engine()
    gpu = SimGpu(0, e, "vllm@127.0.0.1:1")
    now = [1000.0]
    monkeypatch.setattr("llmtop.clock.monotonic", lambda: now[0])
    gpu._last = (now[0], 0.0)
    e.last_batch = 64
    for _ in range(60):  # 30 s fully busy at batch 64
        now[0] += 0.5
        e.busy_s += 0.5
        gpu.update()
    rec = gpu.record()
    assert rec["util"] > 0.95 and rec["power_w"] > 650
    assert rec["throttle"] == ["power cap"] and rec["sm_clock_mhz"] < rec["sm_clock_max_mhz"]
    assert rec["temp_c"] > 50
    assert rec["processes"][0]["engine_target"] == "vllm@127.0.0.1:1"
    e.last_batch = 0
    for _ in range(60):  # idle
        now[0] += 0.5
        gpu.update()
    rec = gpu.record()
    assert rec["util"] < 0.05 and rec["throttle"] == [] and rec["power_w"] < 100
