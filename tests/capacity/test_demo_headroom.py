"""Headroom end to end on the demo vLLM (own process, loopback, no background traffic).

A probe sweep with a TTFT SLO measures its capacity and saves the profile (the CLI's own
path); then a fixed-rate probe drives it at about 50 % and 95 % of that capacity while
``--once --json``, a recording replayed, the TUI's CAP cell and the exporter read
``capacity_used``. The truth is the demo's own ``vllm:request_success_total`` over the same
stretch divided by the saved capacity. Shorter prompts than measured flag the drift; before any
profile, everything is ``–`` and nothing fires.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from llmtop.capacity import load_profiles
from llmtop.config import Config
from llmtop.demo.fleet import free_port
from llmtop.demo.launcher import start_demo
from llmtop.diagnose.thresholds import CAP_WARN
from llmtop.once import run_once
from llmtop.targets import parse_target
from llmtop.ui.fmt import capacity_text

# demo engines in real time for tens of seconds: the ci_step tier (docs/development.md)
pytestmark = [pytest.mark.slow, pytest.mark.ci_step]

SHAPE = ["--prompt-tokens", "1500", "--output-tokens", "8"]
"""Prefill-bound on the demo (2.5e-5 s per prompt token): its capacity is ~20 req/s."""
TTFT_SLO = "0.25"
WINDOW_S = 6.0
"""Seconds every reader averages over: ~110 requests at 95 %, so a late refresh on a loaded
box moves a reading by a few percent, not ten (4 s once read the exporter 15 % high)."""
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)
    handle = start_demo(engines=["vllm"], extra_args=["--no-background"])
    try:
        yield handle.targets[0].base_url, state, tmp_path_factory.mktemp("work")
    finally:
        handle.stop()
        if old is not None:
            os.environ["XDG_STATE_HOME"] = old


def _llmtop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmtop", *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "llmtop", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def _finished(url: str) -> tuple[float, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    n = sum(float(m.group(1)) for m in
            re.finditer(r"^vllm:request_success_total(?:\{[^}]*\})? ([0-9.e+]+)$", text, re.M))
    return time.monotonic(), n


def _once(url: str) -> dict:
    buf = io.StringIO()
    cfg = Config(targets=(parse_target(url),), discover=False)
    assert run_once(cfg, window_s=WINDOW_S, as_json=True, out=buf, err=io.StringIO()) == 0
    return json.loads(buf.getvalue())


def _near(value: float | None, truth: float, what: str) -> None:
    assert value is not None, what
    assert abs(value - truth) <= TOLERANCE * truth, (what, value, truth)


def _drive(url: str, rate: float, work, name: str, prompt: str = "1500") -> dict:
    """Drive at ``rate`` and read capacity_used every way; returns what was read. The drive
    is stopped (Ctrl-C, as a user would) once every reading is taken."""
    drive = _start("probe", url, "--rate", f"{rate:.2f}", "--duration", "20", "--yes",
                   "--prompt-tokens", prompt, "--output-tokens", "8")
    try:
        time.sleep(3.0)  # past the ramp: a fixed rate is steady from here
        rec = str(work / f"{name}.jsonl")
        port = free_port()
        record = _start("record", rec, url, "--duration", "9", "--interval", "1")
        export = _start("export", url, "--listen", f"127.0.0.1:{port}", "--window",
                        str(WINDOW_S), "--duration", "12", "--interval", "1")
        t0, n0 = _finished(url)
        doc = _once(url)
        time.sleep(2.5)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        export.terminate()
        record.wait(timeout=60)
        t1, n1 = _finished(url)
        export.wait(timeout=60)
    finally:
        drive.send_signal(signal.SIGINT)
        drive.wait(timeout=90)
    replay = _llmtop("replay", rec, "--once", "--json", "--window", str(WINDOW_S))
    assert replay.returncode == 0, replay.stderr
    m = re.search(r"^llmtop_engine_capacity_used_ratio\{[^}]*\} ([0-9.e+-]+)$", metrics, re.M)
    return {"rate": (n1 - n0) / (t1 - t0), "once": doc, "replay": json.loads(replay.stdout),
            "export": float(m.group(1)) if m else None}


@pytest.fixture(scope="module")
def measured(demo):
    """The demo's view before any profile, then a probe sweep's saved capacity."""
    url, _, work = demo
    before = _once(url)
    sweep = _llmtop("probe", url, "--sweep", "--levels", "4,8,16,32", "--ttft-slo", TTFT_SLO,
                    "--step-duration", "2", "--warmup", "0.5", "--yes", *SHAPE)
    return url, work, before, sweep


def test_before_a_profile_everything_is_a_dash_and_the_sweep_saves_one(measured):
    _, _, before, sweep = measured
    row = before["engines"][0]
    assert row["capacity_used"] is None and row["capacity"] is None
    assert not [f for f in before["diagnosis"] if f["rule"] == "near_capacity"]
    assert sweep.returncode == 0, sweep.stderr
    assert "saved capacity profile" in sweep.stderr, sweep.stderr
    (profile,) = load_profiles()
    assert profile.slo["ttft"] == float(TTFT_SLO) and profile.shape["prompt_mean"] > 1400
    assert profile.requests_per_s > 0


@pytest.mark.parametrize("share,fires", [(0.5, False), (0.95, True)])
def test_headroom_from_a_measured_capacity(measured, share, fires):
    url, work, _, sweep = measured
    assert sweep.returncode == 0, sweep.stderr
    (profile,) = load_profiles()
    cap = profile.requests_per_s
    got = _drive(url, share * cap, work, f"at{share}")
    truth = got["rate"] / cap
    print(f"capacity {cap:.2f} req/s; at {share}: server counters {got['rate']:.2f} req/s "
          f"= {truth:.3f}; --once {got['once']['engines'][0]['capacity_used']:.3f}, "
          f"replay {got['replay']['engines'][0]['capacity_used']:.3f}, "
          f"exporter {got['export']:.3f}; TTFT p95 "
          f"{got['once']['engines'][0]['ttft_s']['p95']}")
    # the drive did not hold its rate (a lagging generator sends unevenly, so windows of
    # the same stretch disagree, once by 13 %): nothing to judge
    if abs(truth - share) >= TOLERANCE:
        pytest.skip(f"inconclusive: asked {share:.0%} of the capacity ({share * cap:.2f} "
                    f"req/s), the server counted {got['rate']:.2f} req/s = {truth:.0%} (the "
                    "load generator lagged on this box)")
    row = got["once"]["engines"][0]
    _near(row["capacity_used"], truth, f"--once at {share}")
    assert row["capacity"]["requests_per_s"] == pytest.approx(cap)
    assert row["capacity"]["drift"] == []
    rrow = got["replay"]["engines"][0]
    _near(rrow["capacity_used"], truth, f"replay at {share}")
    _near(got["export"], truth, f"exporter at {share}")
    cell = capacity_text(_row_of(rrow))
    assert cell == f"{rrow['capacity_used'] * 100:.0f}%", cell  # the TUI's CAP cell
    rules = [f["rule"] for f in got["once"]["diagnosis"]]
    used = row["capacity_used"]
    # the rule follows the reading it made, whatever the box did
    assert ("near_capacity" in rules) == (used >= CAP_WARN), (used, got["once"]["diagnosis"])
    if (truth >= CAP_WARN) != fires or (used >= CAP_WARN) != fires:
        # a lagging generator (or a late window) put the load on the other side of the
        # threshold than asked: the case is inconclusive, not a failure of the rule
        pytest.skip(f"inconclusive: asked {share:.0%}, the server counted {truth:.0%} and "
                    f"--once read {used:.0%}; the threshold is {CAP_WARN:.0%}")
    assert ("near_capacity" in rules) == fires, (share, got["once"]["diagnosis"])
    ttft = row["ttft_s"]["p95"]
    assert ttft is not None and ttft <= float(TTFT_SLO), (share, ttft)  # before TTFT says so


def _row_of(doc: dict):
    from llmtop.model import EngineRow

    return EngineRow(key="k", target=doc["target"], capacity_used=doc["capacity_used"],
                     capacity=doc["capacity"], capacity_drift=doc["capacity"]["drift"])


def test_shorter_prompts_than_measured_are_drift(measured):
    url = measured[0]
    assert measured[3].returncode == 0, measured[3].stderr
    cap = load_profiles()[0].requests_per_s
    drive = _start("probe", url, "--rate", f"{0.3 * cap:.2f}", "--duration", "10", "--yes",
                   "--prompt-tokens", "600", "--output-tokens", "8")
    try:
        time.sleep(3.0)
        row = _once(url)["engines"][0]
    finally:
        drive.send_signal(signal.SIGINT)
        drive.wait(timeout=60)
    drift = row["capacity"]["drift"]
    assert [d["what"] for d in drift] == ["prompt"], drift
    assert "shorter than when measured" in drift[0]["text"]
    assert capacity_text(_row_of(row)).endswith("~")
