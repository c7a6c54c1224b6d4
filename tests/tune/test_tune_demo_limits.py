"""The tuner against the demo vLLM at its limits: rate levels (open loop, req/s), engines that
refuse to start with vLLM's own out-of-memory words (the dominated configurations skipped),
and ``budget_s`` as a hard bound. Helpers from ``test_tune_demo``. Marked ``slow``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmtop.report.tune import to_csv_text
from llmtop.tune.progress import TuneProgress
from tests.tune.test_tune_demo import ROOT, _gone, _tune, plan_text

# demo engines in real time for tens of seconds: the ci_step tier (docs/development.md)
pytestmark = [pytest.mark.slow, pytest.mark.ci_step]


def test_rate_levels_find_the_boundary_in_req_s(tmp_path):
    """4 seats of 64 + 32 tokens: the demo holds about 14 req/s under a 200 ms TTFT p95.
    The first level, 32 req/s, is far past it: stopped as soon as its p95 is lost."""
    progress = TuneProgress()
    report, lines = _tune(tmp_path, "max_num_seqs = [4]\nkv_tokens = [2048]", "rate = true",
                          probe_extra="rate = 32", progress=progress)
    assert report["load_unit"] == "req/s"
    t = report["trials"][0]
    assert t["status"] == "measured" and t["load_unit"] == "req/s", t["reason"]
    loads = [lv["load"] for lv in t["levels"]]
    assert loads[0] == 32.0  # the first rate level is [probe] rate
    # 32 req/s: 128 requests, 4 s of arrivals that a ~14 req/s engine would drain for ~9 s;
    # stopped once enough were past the TTFT SLO that the p95 could not meet it
    far = t["levels"][0]
    assert not far["met"] and far["partial"], far
    assert "past the TTFT SLO (200 ms), so its p95 cannot meet it" in far["stopped_early"]
    assert far["requests"] + far["errors"] < 128 and far["duration_s"] < 4.0, far
    # every other level a fixed list: 4 s of arrivals, sent on schedule (the drain not
    # counted), whole unless it too was stopped as lost
    for lv in t["levels"]:
        if lv["stopped_early"] is None:
            assert lv["requests"] + lv["errors"] == max(8, int(-(-4 * lv["load"] // 1)))
        else:
            assert not lv["met"]
    missed = [lv for lv in t["levels"] if not lv["met"]]
    assert missed and t["sla_load"] is not None and t["sla_load"] < min(
        lv["load"] for lv in missed)
    seen = [(lv["load"], lv["met"], lv["ttft_p95_s"], lv["waiting_peak"],
             lv["client_bound_reasons"]) for lv in t["levels"]]
    # a rate the generator could not hold is never met (never the boundary)
    assert not any(lv["client_bound"] for lv in t["levels"] if lv["met"]), seen
    if not any(lv["client_bound"] for lv in t["levels"]):  # the server's own boundary
        assert 8 <= t["sla_load"] <= 20, seen
    assert t["limiter"]["kind"] == "seats" and "req/s" in t["limiter"]["evidence"]
    assert t["capacity"].startswith(f"holds {t['sla_load']:g} req/s")
    assert f"{t['sla_load']:g} req/s" in to_csv_text(report)
    assert any("measuring 32 req/s" in ln for ln in lines)
    assert t["sla_boundary"]["rate"] is True and report["traffic"]["identical"] is True
    assert _gone(t["pid"])
    # the live view's state followed the search
    assert (progress.total, progress.started, progress.done, progress.running) == (1, 1, 1, {})
    assert progress.best.startswith(f"max_num_seqs=4, kv_tokens=2048 (holds {t['sla_load']:g} "
                                    "req/s")
    assert progress.last and "req/s" in progress.last


def test_out_of_memory_starts_skip_the_same_with_more_memory(tmp_path):
    """10 GiB of the simulated 80 GiB GPU are held by others: 0.9 of it is more than is free,
    so the demo vLLM exits at start with vLLM's own error, and 0.95 is not even tried."""
    text = plan_text("gpu_memory_utilization = [0.5, 0.9, 0.95]", "max_load = 2").replace(
        "--kv-tokens {kv_tokens}", "--max-num-seqs 2 --gpu-memory-used-gib 10 "
        "--gpu-memory-utilization {gpu_memory_utilization}").replace(
        "--max-num-seqs {max_num_seqs} ", "").replace("max_load = 32\n", "")
    report, _ = _tune(tmp_path, None, plan=text)
    by = {t["params"]["gpu_memory_utilization"]: t for t in report["trials"]}
    assert by[0.5]["status"] == "measured"
    oom = by[0.9]
    assert oom["status"] == "failed" and "less than desired GPU memory utilization" in (
        oom["reason"])
    assert "ValueError: Free memory on device" in oom["log_tail"] and _gone(oom["pid"])
    skipped = by[0.95]
    assert skipped["status"] == "skipped" and skipped["log"] is None
    assert "failed to start out of memory" in skipped["reason"] and "0.95 asks for more" in (
        skipped["reason"])
    assert report["best"]["params"] == {"gpu_memory_utilization": 0.5}


def test_the_budget_is_a_hard_bound(tmp_path):
    """budget_s = 6 cannot hold three trials: the one running is stopped with its server,
    the report is still written, and what did not run is listed as skipped for the budget."""
    plan = tmp_path / "tune.toml"
    plan.write_text(plan_text("max_num_seqs = [4, 8, 16]\nkv_tokens = [2048]",
                              'strategy = "grid"\nbudget_s = 6'))
    out = tmp_path / "tune.json"
    r = subprocess.run([sys.executable, "-m", "llmtop", "tune", "--plan", str(plan), "--json",
                        str(out), "--log-dir", str(tmp_path / "logs")], cwd=ROOT,
                       capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "XDG_STATE_HOME": str(tmp_path)})
    rep = json.loads(out.read_text())
    # how soon after the budget the level is stopped (at once) and killed (10 s later at
    # most) is judged on an injected clock: test_tune_watchdog.py's budget tests
    trials = rep["trials"]
    cut = [t for t in trials if t["status"] == "skipped" and "ran out during" in t["reason"]]
    never = [t for t in trials if t["status"] == "skipped" and "was spent" in t["reason"]]
    assert len(cut) == 1 and never, [(t["status"], t["reason"]) for t in trials]
    assert cut[0]["pid"] and _gone(cut[0]["pid"]) and cut[0]["log"]
    assert all(_gone(t.get("pid")) for t in trials)
    assert any("budget" in w for w in rep["warnings"])
    assert r.returncode in (0, 1), r.stderr[-2000:]
