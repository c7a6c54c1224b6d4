"""Checks against a REAL vLLM (CPU build, tiny local model): see scripts/real_vllm/.

Skipped unless LLMTOP_REAL_VLLM_URL points at a loopback vLLM started with
``--max-num-seqs 8`` (``.ci/run`` does this after the fast suite).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from llmtop.parse.exposition import parse
from tests.real_engine.servers import once_while_sampling

URL = os.environ.get("LLMTOP_REAL_VLLM_URL", "")
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.skipif(not URL, reason="set LLMTOP_REAL_VLLM_URL (see scripts/real_vllm)"),
]
MODEL = "tiny-llama"


def _metric(text: str, family: str, sample: str | None = None) -> float:
    fams = parse(text)
    fam = fams[family]
    name = sample or fam.name
    return sum(s.value for s in fam.samples if s.name == name)


def scrape() -> str:
    return httpx.get(f"{URL}/metrics", timeout=5).text


def gen_total() -> float:
    return _metric(scrape(), "vllm:generation_tokens", "vllm:generation_tokens_total")


async def _one(client: httpx.AsyncClient, max_tokens: int) -> int:
    body = {
        "model": MODEL,
        "prompt": "def main():",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    tokens = 0
    async with client.stream("POST", f"{URL}/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
    return tokens


async def _load(n: int, max_tokens: int) -> int:
    async with httpx.AsyncClient(timeout=120) as client:
        return sum(await asyncio.gather(*(_one(client, max_tokens) for _ in range(n))))


def _llmtop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmtop", *args], capture_output=True, text=True, timeout=timeout
    )


def _wait_idle() -> float:
    last = gen_total()
    for _ in range(60):
        time.sleep(0.5)
        cur = gen_total()
        if cur == last:
            return cur
        last = cur
    raise AssertionError("server never went idle")


def test_once_generation_rate_matches_counter_delta():
    c0 = _wait_idle()
    window = 8.0
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "--once", "--json", "--window", str(window), URL],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(2.5)  # llmtop has made its first scrape
    client_tokens = asyncio.run(_load(12, 32))
    out, err = proc.communicate(timeout=60)
    c1 = gen_total()
    assert proc.returncode == 0, err
    assert client_tokens == 12 * 32
    assert c1 - c0 == client_tokens
    snap = json.loads(out)
    (row,) = [e for e in snap["engines"] if e["model"] == MODEL]
    assert row["engine"] == "vllm" and row["state"] == "ok"
    measured = row["generation_tokens_per_s"] * snap["window_s"]
    assert measured == pytest.approx(c1 - c0, abs=0.5)


def test_once_running_and_waiting_match_server():
    """llmtop's running/waiting are what the server said while llmtop scraped it.

    On an idle machine a batch of 8 x 600 tokens finishes in ~2 s, so the queue can move
    during llmtop's ~1.2 s run: the server is sampled every 50 ms meanwhile, and llmtop's
    pair must be one of the pairs the server reported (running pinned at max-num-seqs).
    """
    async def scenario() -> tuple[set[tuple[float, float]], dict]:
        async with httpx.AsyncClient(timeout=300) as client:
            tasks = [asyncio.create_task(_one(client, 600)) for _ in range(30)]
            seen: set[tuple[float, float]] = set()

            async def sample() -> None:
                text = (await client.get(f"{URL}/metrics")).text
                seen.add((_metric(text, "vllm:num_requests_running"),
                          _metric(text, "vllm:num_requests_waiting")))

            try:
                for _ in range(120):
                    await asyncio.sleep(0.5)
                    text = (await client.get(f"{URL}/metrics")).text
                    run = _metric(text, "vllm:num_requests_running")
                    wait = _metric(text, "vllm:num_requests_waiting")
                    if run == 8 and wait == 22:
                        break
                else:
                    raise AssertionError(f"never reached 8 running / 22 waiting: {run}/{wait}")
                seen.add((run, wait))
                return seen, await once_while_sampling(URL, sample)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    seen, snap = asyncio.run(scenario())
    (row,) = [e for e in snap["engines"] if e["model"] == MODEL]
    assert row["running"] == 8  # pinned at --max-num-seqs 8 while 30 are asked
    assert row["waiting"] > 0
    assert (row["running"], row["waiting"]) in seen, (row["running"], row["waiting"], seen)
    assert row["kv_cache_usage"] is not None and row["kv_capacity_tokens"] is not None


def test_probe_token_count_matches_counter_delta(tmp_path):
    c0 = _wait_idle()
    report = tmp_path / "probe.json"
    out = _llmtop("probe", URL, "--concurrency", "4", "--max-requests", "16",
                  "--output-tokens", "32", "--prompt-tokens", "16", "--json", str(report),
                  "--yes")
    assert out.returncode == 0, out.stderr
    c1 = _wait_idle()
    data = json.loads(report.read_text())
    probe_tokens = sum(s["output_tokens"] for s in data["steps"])
    assert probe_tokens == 16 * 32
    # endpoint detection and calibration requests are reported apart, so totals reconcile
    assert probe_tokens + data["preflight"]["output_tokens"] == c1 - c0


def test_probe_short_sweep_completes(tmp_path):
    report = tmp_path / "sweep.json"
    out = _llmtop("probe", URL, "--sweep", "--max-concurrency", "8", "--step-duration", "4",
                  "--warmup", "1", "--duration", "90", "--output-tokens", "32",
                  "--prompt-tokens", "32", "--json", str(report), "--yes", timeout=180)
    assert out.returncode == 0, out.stderr
    data = json.loads(report.read_text())
    assert [s["concurrency"] for s in data["steps"]][:3] == [1, 2, 4]
    assert all(s["requests"] > 0 and not s["errors"] for s in data["steps"])
    assert data["steps"][-1]["output_tokens_per_s"] > 0


def test_llmtop_without_a_target_finds_the_real_vllm():
    from tests.real_engine.servers import found_without_a_target

    found_without_a_target(URL, "vllm")
