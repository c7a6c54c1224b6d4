"""Checks against a REAL SGLang 0.5.23 (CPU, tiny local model): see scripts/real_sglang/.

llmtop's SGLang row against the server's own counters and gauges over the same window.
Skipped unless LLMTOP_REAL_SGLANG_URL points at a loopback SGLang started by
``scripts/real_sglang/serve.sh STATE --max-running-requests 4`` (``.ci/run`` does this);
with ``LLMTOP_REQUIRE_REAL_ENGINES=1`` a missing server fails instead.
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

pytestmark = [pytest.mark.real_engine]
MODEL = "tiny-llama"
MAX_RUNNING = 4
_HISTS = {"ttft_s": "sglang:time_to_first_token_seconds",
          "itl_s": "sglang:inter_token_latency_seconds",
          "e2e_s": "sglang:e2e_request_latency_seconds",
          "queue_s": "sglang:queue_time_seconds"}


@pytest.fixture(scope="module")
def url() -> str:
    return need_env("LLMTOP_REAL_SGLANG_URL", "scripts/real_sglang/serve.sh, see .ci/run")


def server(url: str) -> dict[str, float]:
    """The server's own numbers: sums over its series (both ``is_streaming`` values)."""
    fams = parse(httpx.get(f"{url}/metrics", timeout=10).text)
    out: dict[str, float] = {}

    def total(family: str, sample: str, **labels: str) -> float:
        fam = fams.get(family)
        return sum(s.value for s in fam.samples if s.name == sample
                   and all(s.labels.get(k) == v for k, v in labels.items())) if fam else 0.0

    for mode in ("decode", "prefill_compute", "prefill_cache"):
        out[mode] = total("sglang:realtime_tokens", "sglang:realtime_tokens_total", mode=mode)
    for key in ("generation_tokens", "prompt_tokens", "num_requests"):
        out[key] = total(f"sglang:{key}", f"sglang:{key}_total")
    out["retracted"] = total("sglang:num_retracted_requests",
                             "sglang:num_retracted_requests_total")  # absent until the first
    for key in ("num_running_reqs", "num_queue_reqs", "token_usage"):
        out[key] = total(f"sglang:{key}", f"sglang:{key}")
    for key, fam in _HISTS.items():
        out[key + ".sum"] = total(fam, fam + "_sum")
        out[key + ".count"] = total(fam, fam + "_count")
    return out


async def _one(client: httpx.AsyncClient, url: str, max_tokens: int) -> int:
    body = {"model": MODEL, "prompt": "def main():", "max_tokens": max_tokens,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    tokens = 0
    async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk.get("usage"):
                    tokens = chunk["usage"]["completion_tokens"]
    return tokens


async def _load(url: str, n: int, max_tokens: int) -> int:
    async with httpx.AsyncClient(timeout=600) as client:
        return sum(await asyncio.gather(*(_one(client, url, max_tokens) for _ in range(n))))


def _wait_idle(url: str) -> dict[str, float]:
    last = server(url)
    for _ in range(240):
        time.sleep(0.5)
        cur = server(url)
        if cur == last and cur["num_running_reqs"] == 0 and cur["num_queue_reqs"] == 0:
            return cur
        last = cur
    raise AssertionError("server never went idle")


def _row(snap: dict) -> dict:
    (row,) = [e for e in snap["engines"] if e["model"] == MODEL]
    assert row["engine"] == "sglang" and row["state"] == "ok", row
    return row


def test_once_window_matches_server_counter_deltas(url):
    """A burst that starts after llmtop's first scrape and ends before its last: every
    windowed number is the server's own delta over the same (idle-to-idle) span."""
    a = _wait_idle(url)
    window = 40.0
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "--once", "--json", "--window", str(window), url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(8)  # llmtop has made its first scrape (slow start on a busy box)
    client_tokens = asyncio.run(_load(url, 6, 24))
    b = _wait_idle(url)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert client_tokens == 6 * 24
    d = {k: b[k] - a[k] for k in a}
    print("server deltas:", d)
    snap = json.loads(out)
    row, span = _row(snap), snap["window_s"]
    # the server's own counters agree with each other and with the client
    assert d["generation_tokens"] == client_tokens == d["decode"] + d["num_requests"]
    assert d["prompt_tokens"] == d["prefill_compute"] + d["prefill_cache"]
    got = {"gen": row["generation_tokens_per_s"] * span, "prompt": row["prompt_tokens_per_s"]
           * span, "req": row["requests_per_s"] * span}
    print("llmtop x window:", got, "prefix hit rate", row["prefix_hit_rate"])
    assert got["gen"] == pytest.approx(d["generation_tokens"], abs=0.5)
    assert got["prompt"] == pytest.approx(d["prompt_tokens"], abs=0.5)
    assert got["req"] == pytest.approx(d["num_requests"], abs=0.01)
    assert row["prefix_hit_rate"] == pytest.approx(
        d["prefill_cache"] / (d["prefill_cache"] + d["prefill_compute"]), abs=1e-3)
    for key in _HISTS:
        n = d[key + ".count"]
        assert row[key]["count"] == pytest.approx(n), key
        assert n > 0 and row[key]["mean"] == pytest.approx(d[key + ".sum"] / n, rel=1e-3), key
        assert row[key]["p50"] is not None and row[key]["p95"] >= row[key]["p50"]
    # no retraction yet: num_retracted_requests_total is absent, the gauge says 0
    assert row["preemptions_per_s"] == 0.0
    # what SGLang does not export is None, never 0 (aborts are cancels, not errors)
    for key in ("decode_s", "inference_s", "iteration_tokens", "spec_accept_rate",
                "waiting_deferred", "errors_per_s"):
        assert row[key] is None, key


def test_once_running_waiting_and_kv_match_server(url):
    """During a queue, llmtop's running/waiting/KV are what the server said meanwhile."""
    async def scenario() -> tuple[list[tuple[float, float, float]], dict]:
        async with httpx.AsyncClient(timeout=600) as client:
            tasks = [asyncio.create_task(_one(client, url, 300)) for _ in range(10)]
            seen: list[tuple[float, float, float]] = []

            async def sample() -> tuple[float, float, float]:
                v = await asyncio.to_thread(server, url)
                seen.append((v["num_running_reqs"], v["num_queue_reqs"], v["token_usage"]))
                return seen[-1]

            try:
                for _ in range(240):
                    await asyncio.sleep(0.5)
                    run, wait, _ = await sample()
                    if run == MAX_RUNNING and wait > 0:
                        break
                else:
                    raise AssertionError(f"never {MAX_RUNNING} running with a queue: {seen}")
                return seen, await once_while_sampling(url, sample)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    seen, snap = asyncio.run(scenario())
    row = _row(snap)
    print("llmtop", row["running"], row["waiting"], row["kv_cache_usage"], "server", seen[-5:])
    # /server_info's max_running_requests, once llmtop has read it (a 1 s run may not have)
    assert row["max_running"] in (None, MAX_RUNNING)
    assert row["kv_capacity_tokens"] == 8192  # --max-total-tokens
    assert (row["running"], row["waiting"]) in {(r, w) for r, w, _ in seen}
    assert row["running"] > 0 and row["waiting"] > 0
    assert row["kv_cache_usage"] in {k for _, _, k in seen}


def test_once_table_shows_dashes_not_zeros(url):
    _wait_idle(url)
    out = llmtop("--once", "--window", "1", url)
    assert out.returncode == 0, out.stderr
    # the table's row; with --enable-mfu-metrics an indented "engine's count" line follows it
    (line,) = [ln for ln in out.stdout.splitlines() if MODEL in ln and not ln.startswith(" ")]
    assert "sglang" in line and " ok " in f" {line} "
    assert "Traceback" not in out.stderr
    # idle: no finished request in the window, so the latency cells are "–", not 0
    assert "–" in line


def test_probe_token_count_matches_generation_tokens_total(url, tmp_path):
    a = _wait_idle(url)
    report = tmp_path / "probe.json"
    out = llmtop("probe", url, "--concurrency", "4", "--max-requests", "8",
                 "--output-tokens", "16", "--prompt-tokens", "16", "--json", str(report),
                 "--yes", timeout=600)
    assert out.returncode == 0, out.stderr
    b = _wait_idle(url)
    data = json.loads(report.read_text())
    probe_tokens = sum(s["output_tokens"] for s in data["steps"])
    assert probe_tokens == 8 * 16
    assert probe_tokens + data["preflight"]["output_tokens"] == (
        b["generation_tokens"] - a["generation_tokens"])


async def test_tui_row(url):
    from llmtop.cli import build_parser
    from llmtop.settings import build_config
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.live import make_source

    args = build_parser().parse_args(["--interval", "0.5", "--window", "5", url])
    config = build_config(args, environ={"XDG_CONFIG_HOME": "/nonexistent-llmtop-real"})
    source, problems = make_source(config, args=args)
    assert problems == []
    app = LlmtopApp(source, config, theme="mono")
    load = asyncio.create_task(_load(url, 6, 200))
    row = None
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            for _ in range(240):
                await pilot.pause(0.5)
                snap = app.snapshot
                rows = [r for r in snap.engines if r.model == MODEL] if snap else []
                if rows and rows[0].running and rows[0].generation_tokens_per_s:
                    row = rows[0]
                    break
            await pilot.pause(0.6)
            screen = app.export_screenshot()
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        await source.aclose()
    assert row is not None and row.engine == "sglang" and row.state == "ok"
    assert row.kv_capacity_tokens == 8192 and row.max_running == MAX_RUNNING
    text = " ".join(screen.replace("&#160;", " ").split())
    assert MODEL in text and "sglang" in text
    assert "Traceback" not in screen


def test_record_and_replay(url, tmp_path):
    """A recording replays to the server's own lifetime counters and the burst's requests."""
    rec = tmp_path / "sglang.llmtop"
    _wait_idle(url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "record", "--interval", "0.5", "--duration", "60",
         "--no-discover", str(rec), url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8)
        asyncio.run(_load(url, 4, 24))
        c1 = _wait_idle(url)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    out = llmtop("replay", str(rec), "--once", "--json", "--at", "end", "--window", "55")
    assert out.returncode == 0, out.stderr
    row = _row(json.loads(out.stdout))
    # the replayed lifetime values are the server's counters at the end of the recording
    life = row["lifetime"]
    assert life["requests"] == pytest.approx(c1["num_requests"])
    assert life["ttft_s"]["mean"] == pytest.approx(
        c1["ttft_s.sum"] / c1["ttft_s.count"], rel=1e-3)
    assert row["requests_per_s"] * row_window(out.stdout) == pytest.approx(4, abs=0.01)


def row_window(out: str) -> float:
    return json.loads(out)["window_s"]


def test_llmtop_without_a_target_finds_the_real_sglang(url):
    from tests.real_engine.servers import found_without_a_target

    found_without_a_target(url, "sglang")
