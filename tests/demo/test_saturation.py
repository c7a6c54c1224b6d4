"""A closed-loop aiohttp client against the demo vLLM (own process, no background traffic):
throughput rises then plateaus, TTFT p95 rises at least 5x past the knee (max_num_seqs 64)."""

from __future__ import annotations

import asyncio
import statistics
import time

import aiohttp
import pytest

from llmtop.demo.launcher import start_demo
from tests.demo.conftest import metrics

LEVELS = (1, 4, 16, 64, 256)
WINDOW_S = 2.0
WARM_S = 1.0
"""Tokens are counted after this: at c=64 all 64 prompts arrive at once and prefill over
several steps, a ramp that a starved box stretches (a rehearsal read c=64 at 1,951 tok/s
and c=256 at 2,859 when the ramp was counted: no plateau, though the demo had one)."""


async def engine_gauges(s: aiohttp.ClientSession, base: str, t_from: float, t_end: float,
                        out: list[dict[str, float]]) -> None:
    """The engine's own running and waiting gauges, read every 0.2 s in [t_from, t_end)."""
    await asyncio.sleep(max(0.0, t_from - time.perf_counter()))
    while time.perf_counter() < t_end:
        m = await metrics(s, base)
        out.append({k: m[f"vllm:num_requests_{k}"] for k in ("running", "waiting")})
        await asyncio.sleep(0.2)


async def closed_loop(base: str, concurrency: int, window_s: float) -> dict:
    """Tokens per second over ``window_s`` after a ``WARM_S`` ramp; TTFT p50 and p95 of
    every request that started (the ramp's included: the knee's burst is the point); the
    engine's running and waiting gauges over the window."""
    ttfts: list[float] = []
    gauges: list[dict[str, float]] = []
    tokens = 0
    t_warm = time.perf_counter() + WARM_S
    t_end = t_warm + window_s

    async def worker(s: aiohttp.ClientSession) -> None:
        nonlocal tokens
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            first = True
            async with s.post(base + "/v1/completions", json={
                "prompt": "word " * 128, "max_tokens": 32, "ignore_eos": True, "stream": True,
            }) as r:
                async for chunk in r.content.iter_any():
                    n = chunk.count(b'"text":"')
                    if n and first:
                        first = False
                        ttfts.append(time.perf_counter() - t0)
                    if t_warm <= time.perf_counter() < t_end:
                        tokens += n

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        tasks = [asyncio.create_task(worker(s)) for _ in range(concurrency)]
        tasks.append(asyncio.create_task(engine_gauges(s, base, t_warm, t_end, gauges)))
        await asyncio.sleep(max(0.0, t_end - time.perf_counter()))
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    ttfts.sort()
    def q(p: float) -> float:
        return ttfts[min(len(ttfts) - 1, int(p * len(ttfts)))] if ttfts else float("inf")

    return {"c": concurrency, "tok_s": tokens / window_s, "ttft_p50": q(0.5),
            "ttft_p95": q(0.95), "n": len(ttfts), "gauges": gauges}


def _no_gain(res: dict) -> bool:
    """c=256 adds at most 25 % to c=64's throughput: past the 64 seats, more load adds none."""
    return res[256]["tok_s"] <= 1.25 * res[64]["tok_s"]


@pytest.mark.slow
@pytest.mark.ci_step  # throughput against the wall clock, in real time
async def test_throughput_plateaus_and_ttft_climbs_past_knee():
    demo = start_demo(engines=["vllm"], extra_args=["--no-background"])
    try:
        base = demo.targets[0].base_url
        res = {}
        for c in LEVELS:
            res[c] = await closed_loop(base, c, WINDOW_S)
            await asyncio.sleep(0.4)  # let aborted streams drain
        print({c: (round(r["tok_s"]), round(r["ttft_p50"], 3), round(r["ttft_p95"], 3), r["n"])
               for c, r in res.items()})
        if not _no_gain(res):
            # throughput against the wall clock, in a worker beside five others: a starved
            # demo once finished 195 requests at c=64 instead of ~320 (census run 32). The
            # pair is measured once more; a demo with no ceiling (--max-num-seqs 512) failed
            # both times (1.39x, 1.47x).
            for c in (64, 256):
                res[c] = await closed_loop(base, c, WINDOW_S)
                await asyncio.sleep(0.4)
            print("again:", {c: (round(res[c]["tok_s"]), res[c]["n"]) for c in (64, 256)})
    finally:
        demo.stop()
    tput = {c: r["tok_s"] for c, r in res.items()}
    ttft = {c: r["ttft_p95"] for c, r in res.items()}
    # throughput rises ...
    assert tput[4] > 2.5 * tput[1]
    assert tput[64] > 1.3 * tput[16] > tput[4]
    # ... then plateaus at the ceiling (max_num_seqs 64): the engine's own gauges show its
    # 64 seats full and the rest queued, and more load adds no throughput. Not "c=256 keeps
    # 75 % of c=64's": beside five workers and a busy loop, a starved demo served c=256 at
    # 1,004 tok/s against c=64's 2,698 (census run 43), though its seats were full
    at256 = res[256]["gauges"]
    assert at256, "no /metrics read at c=256"
    assert max(g["running"] for g in at256) == 64, at256
    assert statistics.median(g["waiting"] for g in at256) >= 100, at256
    assert max(g["running"] for g in res[16]["gauges"]) <= 16
    assert _no_gain(res), (tput[64], tput[256])
    # TTFT flat before the knee (the typical request: p50; a client starved beside the
    # other workers and a busy loop put a stall in c=16's p95 once, 0.12 s against 0.014 s
    # alone), then steep: p95 5x the pre-knee level (c=16) past it. c=64 is the knee itself
    # (64 prompts arrive at once and prefill over several steps), and a starved demo put its
    # p95 at 0.44 s once (census): past the knee TTFT still doubles it
    p50 = {c: r["ttft_p50"] for c, r in res.items()}
    assert p50[16] < 4 * p50[1] + 0.05
    assert ttft[256] >= 5 * ttft[16] and ttft[256] >= 2 * ttft[64]
