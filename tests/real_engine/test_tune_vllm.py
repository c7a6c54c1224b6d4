"""``llmtop tune`` over REAL vLLM (CPU build) settings, each started and stopped by llmtop
(scripts/real_vllm/serve_fg.sh): ``--max-num-seqs`` x ``--max-num-batched-tokens``, a tiny
budget (64 requests per level at least, so the monitor's 1 s ticks see each level). Every
trial must start, be measured with the identical request lists, name a limiter
with its evidence, and leave no process behind; the seat-limited trials must show it in the
engine's own counters (running never above the limit). The note printed per trial lists
llmtop's limiter next to the server's own counters (running/waiting/KV/preemption peaks).

vLLM runs on core 0 (``taskset``; its OMP threads too), the load generator on core 1
(``[probe] cpu_pin``): unpinned on this 2-core box the generator starved beside vLLM and was
named the limiter (``client``) in every trial. Pinned, it passed twice here in a row (193 s
and 207 s): every trial seat-bound, no level client-bound.

Skipped unless LLMTOP_REAL_VLLM_TUNE=1 (``.ci/run`` sets it after the vLLM bake-off).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_engine.test_bakeoff_vllm import group_gone

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.skipif(os.environ.get("LLMTOP_REAL_VLLM_TUNE") != "1",
                       reason="set LLMTOP_REAL_VLLM_TUNE=1 (needs scripts/real_vllm/setup.sh)"),
]


def test_tune_real_vllm_names_limiters_its_counters_confirm(tmp_path):
    serve = ROOT / "scripts" / "real_vllm" / "serve_fg.sh"
    plan = tmp_path / "tune.toml"
    plan.write_text(
        "[probe]\nrequests_per_step = 64\noutput_tokens = 32\nprompt_tokens = 64\n"
        "ttft_slo = 0.5\ngpu_hour_price = 1.0\nwarmup = 0\n"
        "cpu_pin = [1]\n\n"  # the load generator on core 1, vLLM (taskset) on core 0
        '[tune]\nurl = "http://127.0.0.1:{port}"\n'
        f'start = "taskset -c 0 bash {serve} {{port}} --max-num-seqs {{max_num_seqs}} '
        '--max-num-batched-tokens {max_num_batched_tokens}"\n'
        'ready_timeout_s = 300\nmax_load = 64\nbudget_s = 1500\nstrategy = "grid"\n\n'
        "[tune.space]\nmax_num_seqs = [2, 8]\nmax_num_batched_tokens = [1024, 4096]\n")
    out = tmp_path / "tune.json"
    run = subprocess.run([sys.executable, "-m", "llmtop", "tune", "--plan", str(plan),
                          "--json", str(out), "--log-dir", str(tmp_path / "logs")],
                         cwd=ROOT, capture_output=True, text=True, timeout=1800,
                         # vLLM's process (taskset) and its CPU threads on core 0, the
                         # generator on core 1 (cpu_pin): spinning on both cores starves the
                         # generator (docs/probe.md), which llmtop then rightly calls the
                         # limiter ("client") instead of the seats
                         env=dict(os.environ, XDG_STATE_HOME=str(tmp_path),
                                  VLLM_CPU_OMP_THREADS_BIND=os.environ.get(
                                      "VLLM_CPU_OMP_THREADS_BIND", "0")))
    assert out.exists(), run.stderr[-3000:]
    rep = json.loads(out.read_text())
    for t in rep["trials"]:  # the note: llmtop's limiter next to the server's own counters
        peaks = [(lv["load"], lv["running_peak"], lv["waiting_peak"], lv["kv_peak"],
                  lv["preemptions"], lv["client_bound"]) for lv in t["levels"]]
        print(t["params"], t["status"], t["limiter"]["kind"], "|", t["limiter"]["evidence"],
              "| (load, running, waiting, kv, preemptions, client_bound):", peaks)
    assert run.returncode == 0, run.stderr[-3000:]
    assert rep["traffic"]["identical"] is True
    assert rep["options"]["cpu_pin"] == [1]
    for t in rep["trials"]:
        assert t["status"] == "measured", (t["params"], t["reason"], t.get("log_tail"))
        assert t["cold_start_s"] and t["applied"]["kv_capacity_tokens"]
        assert t["limiter"]["kind"] != "none" and t["limiter"]["evidence"]
        seats = t["params"]["max_num_seqs"]
        assert all(lv["running_peak"] is None or lv["running_peak"] <= seats
                   for lv in t["levels"])
        if seats == 2:  # 2 seats queue the rest long before a 0.5 s TTFT breaks elsewhere
            assert t["limiter"]["kind"] == "seats", t["limiter"]
        if t["limiter"]["kind"] == "seats":
            judged = next(lv for lv in t["levels"] if lv["load"] == t["limiter"]["level"])
            assert judged["running_peak"] == seats and judged["waiting_peak"] >= 1
        assert t["pid"] and group_gone(t["pid"])
    assert rep["best"] and "--max-num-seqs" in rep["best"]["command"]
