"""The probe against a REAL vLLM (CPU build, tiny local model; see scripts/real_vllm/).

Skipped unless LLMTOP_REAL_VLLM_URL points at a loopback vLLM. The probe's output-token count
must match the change in ``vllm:generation_tokens_total``, and a short sweep must complete.
"""

from __future__ import annotations

import os
import re

import httpx
import pytest

from llmtop.loadgen.options import ProbeOptions

from .conftest import probe

URL = os.environ.get("LLMTOP_REAL_VLLM_URL", "")
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.skipif(not URL, reason="set LLMTOP_REAL_VLLM_URL to a real vLLM"),
]


def _gen_total() -> float:
    text = httpx.get(URL + "/metrics", timeout=5).text
    return sum(float(m.group(1)) for m in re.finditer(
        r"^vllm:generation_tokens_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M))


async def test_token_count_matches_generation_tokens_total():
    before = _gen_total()
    report, _ = await probe(ProbeOptions(url=URL, concurrency=4, max_requests=12,
                                         output_tokens=16, prompt_tokens=32))
    after = _gen_total()
    counted = sum(s["output_tokens"] for s in report["steps"])
    assert report["steps"][0]["errors"] == {}
    assert counted == 12 * 16
    # prepare()'s one-token probes are reported under "preflight", so the delta is exact
    assert report["preflight"]["requests"] >= 1
    assert after - before == counted + report["preflight"]["output_tokens"]


async def test_short_sweep_completes():
    report, _ = await probe(ProbeOptions(url=URL, sweep=True, max_concurrency=8,
                                         step_duration=2.0, warmup=0.5, output_tokens=16,
                                         prompt_tokens=32, ttft_slo=5.0))
    assert [s["concurrency"] for s in report["steps"]][:2] == [1, 2]
    assert all(s["requests"] > 0 for s in report["steps"])
    # beside a CPU vLLM whose threads are not bound, the generator may be starved: such a
    # step is client-bound and then never the maximum (docs/probe.md, "Protecting ...")
    whole = [s for s in report["steps"] if not s["client_bound"]]
    assert (report["max_throughput"] is not None) == bool(whole), report["steps"]


async def test_lengths_from_the_real_engine_shape_the_load():
    from llmtop.loadgen.traffic import build_traffic, read_signals

    await probe(ProbeOptions(url=URL, concurrency=4, max_requests=12, output_tokens=24,
                             prompt_tokens=200))  # give it a length history
    first = await read_signals(URL)
    traffic = build_traffic(first, None, lengths=True, prefix=True, window_s=0,
                            why_lifetime="--lengths-window 0")
    report, _ = await probe(ProbeOptions(url=URL, concurrency=4, max_requests=12,
                                         traffic=traffic, seed=3))
    assert report["steps"][0]["errors"] == {}
    asked, got = report["lengths"]["asked"], report["lengths"]["actual"]
    # prompts sent as asked within the calibration's error; outputs exactly (ignore_eos)
    # ("Request n:" and word rounding add a few tokens to short prompts)
    assert abs(got["prompt"]["p50"] - asked["prompt"]["p50"]) <= max(
        8, 0.1 * asked["prompt"]["p50"])
    assert got["output"]["p50"] == asked["output"]["p50"]
    assert report["context"] is not None  # max_model_len from /v1/models caps the draws
