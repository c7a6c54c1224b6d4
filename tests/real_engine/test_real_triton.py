"""Checks against a REAL Triton Inference Server (2.51.0 from the ``nvidia-pytriton`` wheel):
see scripts/real_triton/. The model ``sleepy`` sleeps 50 ms per dynamic batch of up to 4 and
fails (``failure{reason="BACKEND"}``) every request of a batch holding a negative input.

Skipped unless LLMTOP_REAL_TRITON_URL (inference, http) and LLMTOP_REAL_TRITON_METRICS_URL
(``/metrics``) point at it; ``.ci/run`` starts it with ``summary_latencies=true``. llmtop's row
is checked against the deltas of the server's own counters over the same window.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time

import httpx
import pytest

from llmtop.parse import triton
from llmtop.parse.exposition import parse
from tests.real_engine.servers import llmtop, need_env

pytestmark = pytest.mark.real_engine
MODEL = "sleepy"
SERVICE_S = 0.05  # scripts/real_triton/model/config.pbtxt
HINT = "see scripts/real_triton"
COUNTERS = ("nv_inference_request_success", "nv_inference_request_failure",
            "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
            "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
            "nv_inference_compute_output_duration_us", "nv_inference_count",
            "nv_inference_exec_count")


@pytest.fixture(scope="module")
def urls() -> tuple[str, str]:
    url = need_env("LLMTOP_REAL_TRITON_URL", HINT)
    metrics = need_env("LLMTOP_REAL_TRITON_METRICS_URL", HINT)
    return url, metrics


def counters(metrics_url: str) -> dict[str, float]:
    """The server's own counters for ``sleepy`` (failures also by reason)."""
    fams = parse(httpx.get(metrics_url, timeout=5).text)
    out: dict[str, float] = {}
    for name in (*COUNTERS, "nv_inference_pending_request_count"):
        for s in fams[name].samples:
            if s.labels.get("model") == MODEL:
                out[name] = out.get(name, 0.0) + s.value
                if "reason" in s.labels:
                    key = f"{name}:{s.labels['reason']}"
                    out[key] = out.get(key, 0.0) + s.value
    return out


def _body(value: int) -> dict:
    return {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32",
                        "data": [value]}]}


async def _load(url: str, n: int, concurrency: int, fail_every: int = 0) -> tuple[int, int]:
    """``n`` requests, ``concurrency`` at a time; every ``fail_every``-th asks to fail.
    Returns (ok, failed) as the client saw them."""
    sem = asyncio.Semaphore(concurrency)
    ok = failed = 0

    async def one(client: httpx.AsyncClient, i: int) -> None:
        nonlocal ok, failed
        bad = fail_every and i % fail_every == fail_every - 1
        async with sem:
            r = await client.post(f"{url}/v2/models/{MODEL}/infer", json=_body(-1 if bad else i))
        if r.status_code == 200:
            ok += 1
        else:
            failed += 1

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(one(client, i) for i in range(n)))
    return ok, failed


def _once_around_load(metrics_url: str, load, window: float = 16.0) -> dict:
    """``llmtop --once --json --window`` with ``load()`` run inside its window."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "--once", "--json", "--window", str(window),
         metrics_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(6)  # llmtop has made its first scrape (Python start-up on a busy box)
        load()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    return json.loads(out)


def _row(snap: dict) -> dict:
    (row,) = [e for e in snap["engines"] if e["model"] == MODEL]
    assert row["engine"] == "triton" and row["state"] == "ok"
    return row


def test_once_rates_and_times_match_server_counter_deltas(urls):
    url, metrics = urls
    c0 = counters(metrics)
    seen: dict[str, tuple[int, int]] = {}

    def load() -> None:
        seen["client"] = asyncio.run(_load(url, 60, 8, fail_every=10))

    snap = _once_around_load(metrics, load)
    c1 = counters(metrics)
    d = {k: c1[k] - c0.get(k, 0.0) for k in c1}
    ok, failed = seen["client"]
    assert ok + failed == 60 and failed >= 6
    # the server counted what the client saw: raised in the model = failure{BACKEND}
    assert d["nv_inference_request_success"] == ok
    assert d["nv_inference_request_failure"] == failed
    assert d["nv_inference_request_failure:BACKEND"] == failed

    row = _row(snap)
    w = snap["window_s"]
    assert row["requests_per_s"] * w == pytest.approx(ok + failed, abs=0.01)
    assert row["errors_per_s"] * w == pytest.approx(failed, abs=0.01)
    assert row["finished"] == {"success": pytest.approx(ok), "error": pytest.approx(failed)}
    # mean times per request from the cumulative *_duration_us counters, which count
    # successful requests only
    n = d["nv_inference_request_success"]
    compute = sum(d[f"nv_inference_compute_{p}_duration_us"] for p in ("input", "infer", "output"))
    for field, us in (("e2e_s", d["nv_inference_request_duration_us"]),
                      ("queue_s", d["nv_inference_queue_duration_us"]),
                      ("inference_s", compute)):
        assert row[field]["count"] == n, field
        assert row[field]["mean"] == pytest.approx(us / n * 1e-6, rel=1e-6), field
        assert row[field]["p50"] is None and row[field]["p95"] is None, field  # mean only
    # and they are the model's: 50 ms per batch, queued behind batches of 4 at concurrency 8
    assert SERVICE_S <= row["inference_s"]["mean"] < row["e2e_s"]["mean"]
    assert row["queue_s"]["mean"] > 0.2 * SERVICE_S
    # what this server does not export is unknown, not zero
    for field in ("running", "max_running", "kv_cache_usage", "kv_capacity_tokens",
                  "prefix_hit_rate", "ttft_s", "itl_s", "tpot_s", "prefill_s", "decode_s",
                  "prompt_len", "gen_len", "iteration_tokens", "spec_accept_rate",
                  "prompt_tokens_per_s", "generation_tokens_per_s", "preemptions_per_s"):
        assert row[field] is None, field
    assert not [g for g in snap["gpus"] if g.get("source") == "triton"]  # no nv_gpu_* on CPU


def test_once_pending_requests_match_server_gauge(urls):
    """Under sustained load llmtop's ``waiting`` is a value the server's pending-request
    gauge showed while llmtop scraped (it moves every 50 ms, so the server is sampled)."""
    url, metrics = urls

    async def scenario() -> tuple[set[float], dict]:
        stop = asyncio.Event()
        async with httpx.AsyncClient(timeout=60) as client:
            async def worker(i: int) -> None:
                for j in range(400):  # bounded even if stop never came
                    if stop.is_set():
                        return
                    await client.post(f"{url}/v2/models/{MODEL}/infer", json=_body(i + j))

            async def pending() -> float:
                text = (await client.get(metrics)).text
                (s,) = [s for s in parse(text)["nv_inference_pending_request_count"].samples
                        if s.labels.get("model") == MODEL]
                return s.value

            tasks = [asyncio.create_task(worker(i)) for i in range(24)]
            seen: set[float] = set()
            try:
                for _ in range(100):
                    await asyncio.sleep(0.1)
                    if await pending() >= 8:
                        break
                else:
                    raise AssertionError("the queue never built up")
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "llmtop", "--once", "--json", "--window", "1", metrics,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                )
                done = asyncio.create_task(proc.communicate())
                while not done.done():
                    seen.add(await pending())
                    await asyncio.sleep(0.02)
                out, err = await done
                seen.add(await pending())
                assert proc.returncode == 0, err.decode()
                return seen, json.loads(out)
            finally:
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)

    seen, snap = asyncio.run(scenario())
    row = _row(snap)
    assert row["waiting"] in seen, (row["waiting"], seen)
    # a queue stood while llmtop scraped (between two batches it can be empty for a moment)
    assert max(seen) >= 8
    assert row["running"] is None  # Triton has no running-requests gauge for this backend


def test_summary_quantiles_as_the_server_printed_them(urls):
    """With ``summary_latencies=true`` the parsed quantiles are the server's, in seconds; a
    quantile printed ``Nan`` (idle window) is left out, never read as 0."""
    url, metrics = urls
    asyncio.run(_load(url, 12, 4))
    text = httpx.get(metrics, timeout=5).text
    fams = parse(text)
    if "nv_inference_request_summary_us" not in fams:
        pytest.skip("server started without --metrics-config summary_latencies=true")
    got = triton.normalize(text).extra["triton_models"][MODEL].get("quantiles_s", {})
    checked = 0
    for fam, key in (("nv_inference_request_summary_us", "e2e"),
                     ("nv_inference_queue_summary_us", "queue"),
                     ("nv_inference_compute_infer_summary_us", "compute_infer")):
        for s in fams[fam].samples:
            if s.labels.get("model") != MODEL or "quantile" not in s.labels:
                continue
            q = s.labels["quantile"]
            if math.isnan(s.value):
                assert q not in got.get(key, {}), (key, q)
            else:
                assert got[key][q] == pytest.approx(s.value * 1e-6), (key, q)
                checked += 1
    assert checked > 0  # just loaded: the summaries have values


def test_once_table_shows_dashes_not_zeros(urls):
    _, metrics = urls
    out = llmtop("--once", "--window", "1", metrics)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if MODEL in ln]
    cells = line.split()
    assert cells[1] == "triton" and cells[3] == "ok"
    # run · wait is "– · N"; KV, prefix, TTFT p50/p95, ITL, gen tok/s, CAP (no capacity
    # profile) and preempt/s are "–"
    assert cells[4:7] == ["–", "·", cells[6]] and cells[6] != "–"
    assert cells[7:13] == ["–"] * 6 and cells[14:16] == ["–", "–"]
    assert cells[13] != "–" and cells[16] != "–"  # req/s and err/s are known (0.00 at idle)
    assert len(cells) == 17
    assert "Traceback" not in out.stderr


async def test_tui_row(urls):
    url, metrics = urls
    from llmtop.cli import build_parser
    from llmtop.settings import build_config
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.live import make_source

    args = build_parser().parse_args(["--interval", "0.5", "--window", "3", metrics])
    config = build_config(args, environ={"XDG_CONFIG_HOME": "/nonexistent-llmtop-real"})
    source, problems = make_source(config, args=args)
    assert problems == []
    app = LlmtopApp(source, config, theme="mono")
    load = asyncio.create_task(_load(url, 200, 8, fail_every=20))
    row = None
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            for _ in range(60):
                await pilot.pause(0.3)
                snap = app.snapshot
                rows = [r for r in snap.engines if r.model == MODEL] if snap else []
                if rows and rows[0].requests_per_s:
                    row = rows[0]
                    break
            await pilot.pause(0.6)
            screen = app.export_screenshot()
    finally:
        await load
        await source.aclose()
    assert row is not None and row.engine == "triton" and row.state == "ok"
    assert row.kv_cache_usage is None and row.generation_tokens_per_s is None
    text = " ".join(screen.replace("&#160;", " ").split())
    assert MODEL in text and "triton" in text
    assert "Traceback" not in screen


def test_record_and_replay(urls, tmp_path):
    url, metrics = urls
    rec = tmp_path / "triton.llmtop"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "record", "--interval", "0.5", "--duration", "10",
         "--no-discover", str(rec), metrics],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(4)
        c0 = counters(metrics)
        ok, failed = asyncio.run(_load(url, 40, 8, fail_every=8))
        c1 = counters(metrics)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert c1["nv_inference_request_success"] - c0["nv_inference_request_success"] == ok
    out = llmtop("replay", str(rec), "--once", "--json", "--at", "end", "--window", "9")
    assert out.returncode == 0, out.stderr
    row = _row(json.loads(out.stdout))
    assert row["finished"] == {"success": pytest.approx(ok), "error": pytest.approx(failed)}
    # the replayed lifetime values are the server's counters at the end of the recording
    life = row["lifetime"]
    assert life["requests"] == pytest.approx(c1["nv_inference_request_success"]
                                             + c1["nv_inference_request_failure"])
    assert life["e2e_s"]["mean"] == pytest.approx(
        c1["nv_inference_request_duration_us"] / c1["nv_inference_request_success"] * 1e-6)


def test_llmtop_without_a_target_finds_the_real_triton(urls):
    from tests.real_engine.servers import found_without_a_target

    found_without_a_target(urls[1], "triton")  # its --metrics-port
