"""Load shapes, endpoint detection, calibration fallbacks and length distributions."""

from __future__ import annotations

import random
import sys

import pytest
from mock_server import start_mock  # on sys.path via conftest.py

from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.prompts import sample_length

from .conftest import probe


async def test_constant_rate_open_loop(fast_mock):
    report, _ = await probe(ProbeOptions(url=fast_mock.url, rate=20, duration=2.0,
                                         output_tokens=8, prompt_tokens=16))
    s = report["steps"][0]
    assert s["rate"] == 20 and s["concurrency"] is None
    # the rate is held, or the step says the generator could not hold it (never silently)
    assert s["achieved_rate"] == pytest.approx(20, rel=0.15) or (
        s["client_bound"] and any("achieved rate" in r or "late" in r or "paused" in r
                                  for r in s["client_bound_reasons"])), s
    assert s["errors"] == {}
    if not s["client_bound"]:  # a rate held: its requests were sent and finished
        assert s["requests"] >= 24, s
    assert s["dispatch_lag_ms"] is not None


async def test_poisson_rate_sweep_with_cap(fast_mock):
    report, _ = await probe(ProbeOptions(
        url=fast_mock.url, rate=10, poisson=True, sweep=True, concurrency=4,
        step_duration=0.8, warmup=0.2, duration=2.4, output_tokens=8, prompt_tokens=16))
    rates = [s["rate"] for s in report["steps"]]
    assert rates[:2] == [10, 20]
    assert all(s["achieved_concurrency"] <= 4.01 for s in report["steps"])
    assert report["stop_reason"] == "duration"
    assert report["max_throughput"]["rate"] in rates


async def test_chat_endpoint_from_url_and_usage_calibration(fast_mock):
    report, _ = await probe(ProbeOptions(url=fast_mock.url + "/v1/chat/completions",
                                         concurrency=2, max_requests=6, output_tokens=5,
                                         prompt_tokens=40))
    s = report["steps"][0]
    assert report["endpoint"] == "chat"
    assert report["prompt_calibration"]["method"] == "usage"
    assert s["requests"] == 6 and s["output_tokens"] == 30
    # the role-only first chunk is not content: TTFT is the mock's 10 ms, not ~0
    assert s["ttft_s"]["p50"] >= 0.009
    # prompts hit the requested length within a few tokens (mock: 1 token per 4 chars)
    assert s["prompt_tokens"] / 6 == pytest.approx(40, abs=6)


async def test_ignore_eos_rejected_is_dropped_and_llamacpp_usage():
    with start_mock(ttft=0.0, itl=0.0, no_ignore_eos=True, usage_style="llamacpp") as m:
        report, _ = await probe(ProbeOptions(url=m.url, concurrency=2, max_requests=4,
                                             output_tokens=7, prompt_tokens=16))
    assert report["ignore_eos"] is False
    assert report["endpoint"] == "completions"
    s = report["steps"][0]
    assert s["errors"] == {} and s["output_tokens"] == 28


async def test_cli_success_writes_all_reports(fast_mock, tmp_path):
    import asyncio
    import json

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llmtop", "probe", fast_mock.url, "--concurrency", "2",
        "--max-requests", "8", "--output-tokens", "4", "--prompt-tokens", "8",
        "--json", str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv"),
        "--md", str(tmp_path / "r.md"), stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["steps"][0]["requests"] == 8 and data["stop_reason"] == "max_requests"
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 2
    assert "| 1 | c=2 |" in (tmp_path / "r.md").read_text()
    assert b"c=2" in out


def test_length_distributions():
    rng = random.Random(1)
    assert {sample_length(rng, 100, "fixed") for _ in range(10)} == {100}
    u = [sample_length(rng, 100, "uniform") for _ in range(2000)]
    assert min(u) >= 50 and max(u) <= 150 and 95 < sum(u) / len(u) < 105
    n = [sample_length(rng, 100, "normal") for _ in range(2000)]
    assert 95 < sum(n) / len(n) < 105 and min(n) >= 1
