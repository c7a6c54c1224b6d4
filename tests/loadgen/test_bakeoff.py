"""The bake-off against local fake engines of known speed (127.0.0.1 only).

The fakes (``bakeoff_fake.py``) count what they served and log the hash of every prompt;
the report must agree with them.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from llmtop.gpu import NullSampler
from llmtop.loadgen.bakeoff import run_bakeoff
from llmtop.loadgen.cost import cost_per_mtok, usd_per_mtok
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.plan import engines_from_urls
from llmtop.monitor import Monitor


def no_gpu_monitor(config):
    """The monitor the CLI uses, without GPU sampling (tests run on any box)."""
    return Monitor(config, gpu_sampler=NullSampler())


FAKE = str(Path(__file__).with_name("bakeoff_fake.py"))
OUT = 16
LEVELS = (1, 4)
PER_STEP = 8


def start_fake(tmp: Path, name: str, *args: str) -> tuple[subprocess.Popen, str, Path]:
    log = tmp / f"{name}.hashes"
    p = subprocess.Popen([sys.executable, FAKE, "--hash-log", str(log), *args],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    port = None
    for _ in range(5):
        line = p.stdout.readline()
        if line.startswith("PORT "):
            port = int(line.split()[1])
            break
    assert port, "fake did not start"
    return p, f"http://127.0.0.1:{port}", log


def stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def bakeoff(tmp_path_factory):
    """Three fakes: fast (batch 8, 4 ms/token), slow (batch 2, 20 ms/token), short
    (fast, but every request ends at half its max tokens); one bake-off over them."""
    tmp = tmp_path_factory.mktemp("bakeoff")
    specs = [("fast", "--itl", "0.004", "--max-batch", "8"),
             ("slow", "--itl", "0.02", "--max-batch", "2"),
             ("short", "--itl", "0.004", "--max-batch", "8", "--short")]
    fakes = [start_fake(tmp, name, *args) for name, *args in specs]
    try:
        engines = engines_from_urls([u for _p, u, _l in fakes])
        opts = ProbeOptions(url=fakes[0][1], levels=LEVELS, requests_per_step=PER_STEP,
                            output_tokens=OUT, prompt_tokens=32, ttft_slo=0.05, seed=7)
        lines: list[str] = []
        report = run_bakeoff(engines, opts, gpu_hour_price=2.0, say=lines.append,
                             watch_interval_s=0.2, new_monitor=no_gpu_monitor,
                             log_dir=str(tmp))
        counted = [stats(u) for _p, u, _l in fakes]
        hashes = [log.read_text().split() for _p, _u, log in fakes]
        yield report, counted, hashes, [u for _p, u, _l in fakes]
    finally:
        for p, _u, _l in fakes:
            p.terminate()
            p.wait(10)


def test_report_follows_the_json_contract(bakeoff):
    report, _c, _h, urls = bakeoff
    assert report["kind"] == "bakeoff"
    assert [e["url"] for e in report["endpoints"]] == urls
    assert set(report["traffic"]) >= {"kind", "seed", "requests_per_step", "hash"}
    assert report["traffic"]["seed"] == 7 and report["traffic"]["kind"] == "synthetic"
    assert isinstance(report["warnings"], list)
    for e in report["endpoints"]:
        for key in ("name", "url", "engine", "engine_version", "error", "cold_start_s",
                    "server", "cost_per_mtok_usd", "short_outputs", "steps", "capacity",
                    "sla_boundary", "max_throughput", "lengths"):
            assert key in e, key
        assert e["error"] is None and e["cold_start_s"] is None  # not started by llmtop
        assert set(e["server"]) >= {"running_peak", "waiting_peak", "kv_peak", "preemptions"}
        assert e["engine"] == "vllm" and e["engine_version"] == "0.32.0"
        assert [s["concurrency"] for s in e["steps"]] == list(LEVELS)  # every level ran


def test_every_engine_got_the_identical_request_list(bakeoff):
    report, counted, hashes, _u = bakeoff
    # what each fake itself saw: the same prompts and max tokens, as many times each
    assert collections.Counter(hashes[0]) == collections.Counter(hashes[1]) \
        == collections.Counter(hashes[2])
    assert len(set(h for h in hashes[0])) == len(hashes[0]) - _repeated_setup(hashes[0])
    # and what the report says it sent
    sent = {e["request_list_sha256"] for e in report["endpoints"]}
    assert len(sent) == 1 and report["traffic"]["hash"] in sent
    assert report["traffic"]["identical"] is True
    for e, c in zip(report["endpoints"], counted, strict=True):
        assert c["requests"] == e["requests_sent"] + e["preflight"]["requests"]
        # every level a fixed list: max(N, 4 x c) measured, plus one warm-up per slot
        assert e["requests_sent"] == sum(max(PER_STEP, 4 * c) + c for c in LEVELS)
        assert [s["requests"] for s in e["steps"]] == [max(PER_STEP, 4 * c) for c in LEVELS]


def _repeated_setup(hashes: list[str]) -> int:
    """Setup probes (endpoint detection) repeat one prompt; the list itself never does."""
    return sum(n - 1 for n in collections.Counter(hashes).values())


def test_numbers_agree_with_what_the_engines_counted(bakeoff):
    report, counted, _h, _u = bakeoff
    fast, slow, short = report["endpoints"]
    for e, c in zip(report["endpoints"], counted, strict=True):
        # the engine's own token counter over the run (monitor rows) = what the fake served
        assert e["server"]["generation_tokens"] == c["tokens"]
        assert e["server"]["running_peak"] <= c["peak_running"]
        measured = sum(s["output_tokens"] for s in e["steps"])
        per_req = OUT // 2 if e is short else OUT
        assert measured == per_req * sum(s["requests"] for s in e["steps"])
        # the fakes count finished requests as vLLM does: every request is on the books
        rec = e["reconciliation"]
        assert rec["ok"] and rec["server_requests"] == c["requests"], rec
    # the slow engine decodes 2 at a time: it queued, and the monitor saw it
    assert counted[1]["peak_running"] == 2 and slow["server"]["running_peak"] <= 2
    assert slow["server"]["waiting_peak"] >= 1
    # ranking: batch 8 at 4 ms/token vs batch 2 at 20 ms/token (at c=4: 1,000 vs 100 tok/s at
    # most; a busy box slows the fast fake's event loop, never the slow one's sleeps)
    assert fast["max_throughput"]["output_tokens_per_s"] > \
        slow["max_throughput"]["output_tokens_per_s"]
    assert slow["max_throughput"]["output_tokens_per_s"] <= 2 / 0.02 * 1.05


def test_an_engine_that_ignores_max_tokens_is_flagged(bakeoff):
    report, counted, _h, _u = bakeoff
    fast, _slow, short = report["endpoints"]
    assert counted[2]["short"] == counted[2]["requests"] - short["preflight"]["requests"]
    assert short["short_outputs"] == 1.0 and short["comparable"] is False
    assert fast["short_outputs"] == 0.0 and fast["comparable"] is True
    flagged = [w for w in report["warnings"] if "before their max tokens" in w]
    assert len(flagged) == 1 and short["name"] in flagged[0]
    assert "not comparable" in flagged[0]


def test_cost_per_million_tokens(bakeoff):
    report, _c, _h, _u = bakeoff
    assert usd_per_mtok(2.0, 1, 1000.0) == pytest.approx(2.0 / 3.6e6 * 1e6)
    assert usd_per_mtok(3.0, 2, 500.0) == pytest.approx(3.0 * 2 / (500 * 3600) * 1e6)
    assert usd_per_mtok(2.0, 1, 0.0) is None and usd_per_mtok(2.0, 1, None) is None
    for e in report["endpoints"]:
        c = e["cost_per_mtok_usd"]
        top = e["max_throughput"]["output_tokens_per_s"]
        assert c["max"] == pytest.approx(2.0 / (top * 3600) * 1e6)
        sla = e["sla_boundary"]
        if sla["met"]:
            assert c["sla"] == pytest.approx(2.0 / (sla["output_tokens_per_s"] * 3600) * 1e6)
        else:
            assert c["sla"] is None
    assert cost_per_mtok({"max_throughput": None, "sla_boundary": None}, None) is None
    unmet = {"max_throughput": {"output_tokens_per_s": 100.0},
             "sla_boundary": {"met": False, "output_tokens_per_s": None}}
    assert cost_per_mtok(unmet, 1.0)["sla"] is None
