"""Against the demo engines (llmtop.demo; own process, loopback, no background traffic):
a sweep finds the demo vLLM's ceiling (max_num_seqs 64) within one ladder step, and the
shared-prefix mode raises the demo's prefix-cache hit rate."""

from __future__ import annotations

import re

import httpx
import pytest

from llmtop.loadgen.options import ProbeOptions

from .conftest import probe

launcher = pytest.importorskip("llmtop.demo.launcher")

DEMO_VLLM_CEILING = 64  # llmtop/demo/profiles.py: vllm max_num_seqs=64


@pytest.fixture(scope="module")
def demo_vllm():
    demo = launcher.start_demo(engines=["vllm"], extra_args=["--no-background"])
    try:
        yield demo.targets[0].base_url
    finally:
        demo.stop()


async def _prefix_counters(base: str) -> tuple[float, float]:
    async with httpx.AsyncClient() as c:
        text = (await c.get(base + "/metrics")).text

    def total(name: str) -> float:
        return sum(float(m.group(1)) for m in
                   re.finditer(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))

    return total("vllm:prefix_cache_hits_total"), total("vllm:prefix_cache_queries_total")


async def test_sweep_finds_the_ceiling(demo_vllm):
    opts = ProbeOptions(url=demo_vllm, sweep=True, max_concurrency=256, step_duration=1.3,
                        warmup=0.5, output_tokens=32, prompt_tokens=64, ttft_slo=2.0)
    report, events = await probe(opts)
    steps = report["steps"]
    assert len(steps) >= 5, [s["concurrency"] for s in steps]
    assert all(not s["errors"] for s in steps)
    sat = report["saturation"]
    assert sat is not None, [(s["concurrency"], round(s["output_tokens_per_s"])) for s in steps]
    ladder = [s["concurrency"] for s in steps]
    i = ladder.index(sat["concurrency"])
    j = ladder.index(DEMO_VLLM_CEILING)
    assert abs(i - j) <= 1, (sat, [(s["concurrency"], round(s["output_tokens_per_s"]))
                                   for s in steps])
    assert report["max_throughput"]["output_tokens_per_s"] > 0
    assert report["sla_boundary"] is not None
    assert [e["type"] for e in events].count("step_done") == len(steps)


async def test_shared_prefix_raises_prefix_hit_rate(demo_vllm):
    h0, q0 = await _prefix_counters(demo_vllm)
    base = {"url": demo_vllm, "concurrency": 8, "duration": 2.0, "output_tokens": 8,
            "prompt_tokens": 32}
    await probe(ProbeOptions(**base))
    h1, q1 = await _prefix_counters(demo_vllm)
    await probe(ProbeOptions(**base, shared_prefix=(2, 512)))
    h2, q2 = await _prefix_counters(demo_vllm)
    unique_rate = (h1 - h0) / max(q1 - q0, 1)
    prefix_rate = (h2 - h1) / max(q2 - q1, 1)
    assert q2 > q1 > q0
    assert prefix_rate > 0.5 and prefix_rate > unique_rate + 0.3, (unique_rate, prefix_rate)
