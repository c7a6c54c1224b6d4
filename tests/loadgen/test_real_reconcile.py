"""Counts that add up on REAL engines, run after run (see scripts/real_vllm, real_llamacpp).

Skipped unless LLMTOP_REAL_VLLM_URL / LLMTOP_REAL_LLAMACPP_URL point at loopback servers
(``.ci/run`` starts them). ``LLMTOP_RECONCILE_RUNS`` sets the number of runs (default 5).
Each run must account for every request sent and match the server's generation counter,
also when the run's end cuts requests off.
"""

from __future__ import annotations

import os

import pytest

from llmtop.loadgen.options import ProbeOptions

from .conftest import probe

RUNS = int(os.environ.get("LLMTOP_RECONCILE_RUNS", "5"))
pytestmark = pytest.mark.real_engine


def _url(name: str) -> str:
    url = os.environ.get(name, "")
    if not url:
        pytest.skip(f"set {name} to a real server")
    return url


@pytest.mark.parametrize("env", ["LLMTOP_REAL_VLLM_URL", "LLMTOP_REAL_LLAMACPP_URL"])
async def test_every_request_and_token_is_accounted_for(env):
    url = _url(env)
    for i in range(RUNS):
        report, _ = await probe(ProbeOptions(url=url, concurrency=2, max_requests=8,
                                             output_tokens=16, prompt_tokens=16, seed=i))
        rec = report["reconciliation"]
        assert rec["ok"], (i, rec)
        assert (rec["finished"], rec["output_tokens"]) == (8, 128), (i, rec)
        # the server's counters are read before the preflight: it is on the books too
        assert rec["server_generation_tokens"] == 128 + rec["preflight_output_tokens"], (i, rec)
        assert rec["preflight_requests"] == report["preflight"]["requests"] >= 1, (i, rec)
        if rec["server_requests"] is not None:  # vLLM counts finished requests
            assert rec["server_requests"] == 8 + rec["preflight_requests"], (i, rec)


@pytest.mark.parametrize("env", ["LLMTOP_REAL_VLLM_URL", "LLMTOP_REAL_LLAMACPP_URL"])
async def test_requests_cut_off_at_the_end_are_accounted_for(env):
    url = _url(env)
    report, _ = await probe(ProbeOptions(url=url, concurrency=2, duration=2.0,
                                         output_tokens=400, prompt_tokens=16))
    rec = report["reconciliation"]
    assert rec["ok"], rec
    assert rec["sent"] == rec["finished"] + rec["failed"] + rec["cancelled"]
    assert rec["server_generation_tokens"] is not None
