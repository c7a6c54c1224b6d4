"""The probe's honesty rules hold in the new modes: confirmation before a non-loopback host
(before any engine is read or waited on), Ctrl-C/stop with a partial report, the
client-bound self-check and limits. Traffic goes to 127.0.0.1 only."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from llmtop.loadgen.api import start_probe
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.shape import LengthDist

REMOTE = "http://192.0.2.10:8000"  # RFC 5737 documentation address: never contacted


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmtop", "probe", *args],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_non_loopback_refused_before_reading_any_engine(tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hi"}\n')
    for extra in (["--dataset", str(data)],
                  ["--lengths-from", "127.0.0.1:1", "--lengths-window", "0"],
                  ["--prefix-hit-from", "127.0.0.1:1", "--lengths-window", "5"]):
        r = _cli(REMOTE, *extra)
        assert r.returncode == 2, r.stderr
        assert "refusing to send load to non-loopback host" in r.stderr, r.stderr
        assert "cannot read metrics" not in r.stderr  # asked first, read nothing


def _traffic() -> dict:
    p = LengthDist((64.0, 128.0, float("inf")), (5.0, 5.0, 0.0), 960.0).describe()
    o = LengthDist((8.0, 16.0, float("inf")), (5.0, 5.0, 0.0), 120.0).describe()
    return {"source": "test", "engine": "vllm", "prompt": p, "output": o,
            "prefix_hit_rate": 0.5, "window": "lifetime (test)"}


def _stop_after_progress(h, n: int = 3) -> list[dict]:
    seen: list[dict] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen += h.wait(0.2)
        if sum(1 for e in seen if e["type"] == "progress") >= n:
            break
    h.stop()
    seen += h.wait(10)
    return seen


def test_stop_keeps_a_partial_report_in_traffic_and_dataset_modes(slow_mock, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q {i}", "max_tokens": 40}) + "\n"
                            for i in range(20)))
    for opts in (ProbeOptions(url=slow_mock.url, concurrency=8, duration=30,
                              traffic=_traffic(), seed=1),
                 ProbeOptions(url=slow_mock.url, concurrency=8, duration=30,
                              dataset=str(data), seed=1)):
        h = start_probe(opts)
        _stop_after_progress(h)
        report = h.result()
        assert report is not None and report["partial"] and report["stop_reason"] == "stopped"
        assert report["steps"][0]["partial"] and report["cancelled_in_flight"] > 0
        assert report["traffic"]["kind"] in ("engine", "dataset")
        step = report["steps"][0]
        assert "client_bound" in step and step["client_cpu"] is not None  # self-check ran
        if report["traffic"]["kind"] == "engine":
            asked = report["lengths"]["asked"]["prompt"]
            assert asked is not None and 1 <= asked["p50"] <= 128


def test_limits_hold_with_a_dataset(fast_mock, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "a", "max_tokens": 4}\n{"prompt": "b", "max_tokens": 6}\n')
    h = start_probe(ProbeOptions(url=fast_mock.url, concurrency=2, max_requests=12,
                                 dataset=str(data), seed=2))
    h.wait(30)
    report = h.result()
    assert report["requests_sent"] == 12 and report["stop_reason"] == "max_requests"
    outs = report["lengths"]["asked"]["output"]
    assert 4 <= outs["p50"] <= 6 and outs["p99"] <= 6
