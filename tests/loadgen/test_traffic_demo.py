"""--lengths-from / --prefix-hit-from / --dataset end to end, against the demo vLLM and the
mock (own processes, 127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
import pytest

from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.traffic import TrafficError, build_traffic, read_signals

from .conftest import probe

launcher = pytest.importorskip("llmtop.demo.launcher")


@pytest.fixture(scope="module")
def demo_vllm():
    demo = launcher.start_demo(engines=["vllm"], extra_args=["--no-background"])
    try:
        yield demo.targets[0].base_url
    finally:
        demo.stop()


async def test_probe_copies_the_engines_lengths_and_prefix_hits(demo_vllm):
    # production-like history: 300-token shared prefix + 200..600 tokens, 20..60 out
    prime = ProbeOptions(url=demo_vllm, concurrency=8, max_requests=40, prompt_tokens=400,
                         output_tokens=40, length_dist="uniform", shared_prefix=(1, 300))
    await probe(prime)
    first = await read_signals(demo_vllm)
    traffic = build_traffic(first, None, lengths=True, prefix=True, window_s=0,
                            why_lifetime="--lengths-window 0")
    assert 500 < traffic["prompt"]["quantiles"]["p50"] < 1000
    assert 20 < traffic["output"]["quantiles"]["p50"] < 50
    h = traffic["prefix_hit_rate"]
    assert 0.1 < h < 0.9
    report, _ = await probe(ProbeOptions(url=demo_vllm, concurrency=8, max_requests=60,
                                         traffic=traffic, seed=5))
    got = report["lengths"]["actual"]
    asked = report["lengths"]["asked"]
    assert 500 < asked["prompt"]["p50"] < 1000 and 500 < got["prompt"]["p50"] < 1000, got
    assert 20 < asked["output"]["p50"] <= 50
    assert report["traffic"]["kind"] == "engine" and report["context"] == 2048
    assert report["traffic"]["window"] == "lifetime (--lengths-window 0)"
    second = await read_signals(demo_vllm + "/v1/completions")  # the probe's URL form works
    mine = build_traffic(first, second, lengths=False, prefix=True, window_s=1)
    assert abs(mine["prefix_hit_rate"] - h) < 0.25, (mine["prefix_hit_rate"], h)


async def test_lengths_from_a_server_without_metrics_is_a_clear_error(fast_mock):
    with pytest.raises(TrafficError, match="cannot read metrics"):
        await read_signals(fast_mock.url)


async def _run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llmtop", "probe", *args, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    return proc.returncode or 0, out.decode(), err.decode()


async def _requests(mock) -> int:
    async with httpx.AsyncClient() as c:
        return (await c.get(mock.url + "/stats")).json()["requests"]


async def test_cli_dataset_bad_line_sends_nothing_and_good_file_runs(fast_mock, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hi"}\n{"prompt": 3}\n')
    before = await _requests(fast_mock)
    rc, _out, err = await _run_cli(fast_mock.url, "--dataset", str(bad), "--max-requests", "4")
    assert rc == 2 and "line 2" in err, err
    assert await _requests(fast_mock) == before  # nothing was sent
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps({"prompt": f"question {i}", "max_tokens": 3 + i})
                              for i in range(5)) + "\n")
    rc, out, err = await _run_cli(fast_mock.url, "--dataset", str(good), "--max-requests", "10",
                                  "--concurrency", "2", "--seed", "3", "--json",
                                  str(tmp_path / "r.json"))
    assert rc == 0, err
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["traffic"]["kind"] == "dataset" and rep["steps"][0]["requests"] == 10
    assert rep["lengths"]["asked"]["prompt"] is None  # the server's usage tells
    assert rep["lengths"]["actual"]["output"]["p50"] is not None
    assert "prompts from" in out and "generated" in out


async def test_cli_prometheus_unreachable_is_a_clear_error(fast_mock):
    rc, _out, err = await _run_cli(fast_mock.url, "--lengths-from", "prometheus:http://127.0.0.1:1",
                                   "--match", 'job="vllm"', "--max-requests", "1")
    assert rc == 2 and "Prometheus: cannot reach" in err, err


async def test_cli_reads_a_real_window_between_two_scrapes(demo_vllm, tmp_path):
    out_json = tmp_path / "r.json"
    await asyncio.sleep(3.5)  # an engine younger than the window gives its lifetime instead
    cli = asyncio.create_task(_run_cli(
        demo_vllm, "--lengths-from", demo_vllm, "--lengths-window", "3", "--concurrency", "2",
        "--max-requests", "6", "--json", str(out_json)))
    # traffic during the window: 150-token prompts, unlike anything sent before
    await probe(ProbeOptions(url=demo_vllm, concurrency=4, duration=6.0, prompt_tokens=150,
                             output_tokens=12))
    rc, out, err = await cli
    assert rc == 0, err
    rep = json.loads(out_json.read_text())
    tr = rep["traffic"]
    assert tr["window"].startswith("last 3 s (two scrapes)"), tr["window"]
    assert 100 < tr["prompt"]["quantiles"]["p50"] <= 200  # only the window's requests
    assert 5 <= tr["output"]["quantiles"]["p50"] <= 20
    assert "shaped like" in out and "last 3 s" in out


async def test_sglang_length_histograms_shape_the_load():
    demo = launcher.start_demo(engines=["sglang"], extra_args=["--no-background"])
    try:
        url = demo.targets[0].base_url
        await probe(ProbeOptions(url=url, concurrency=4, max_requests=16, prompt_tokens=600,
                                 output_tokens=30))
        sig = await read_signals(url)
        assert sig.engine == "sglang"
        tr = build_traffic(sig, None, lengths=True, prefix=False, window_s=0,
                           why_lifetime="--lengths-window 0")
        assert 300 < tr["prompt"]["quantiles"]["p50"] < 1000
        report, _ = await probe(ProbeOptions(url=url, concurrency=4, max_requests=12,
                                             traffic=tr, seed=2))
        assert 300 < report["lengths"]["actual"]["prompt"]["p50"] < 1000
    finally:
        demo.stop()
