"""``llmtop export`` and ``llmtop record FILE --listen`` as commands (child processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.export.conftest import ROOT
from tests.export.test_vs_once import samples


def _wait_engines(url: str, n: int) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = samples(httpx.get(url, timeout=5).text)
        if sum(1 for name, _ in got if name == "llmtop_engine_up") >= n:
            return got
        time.sleep(0.5)
    raise AssertionError(f"no {n} engines on {url}")


def test_export_demo(exporter_factory):
    exp = exporter_factory(["--demo", "--interval", "1"])
    got = _wait_engines(exp.url, 3)
    engines = {dict(lb).get("engine") for n, lb in got if n == "llmtop_engine_up"}
    assert engines == {"vllm", "sglang", "triton"}
    assert got[("llmtop_exporter_info", frozenset({("mode", "direct"),
                                                   ("version", _version())}))] == 1.0
    assert any(n == "llmtop_gpu_utilization_ratio" for n, _ in got)
    assert any(n == "llmtop_scrape_duration_seconds" for n, _ in got)


def test_record_listen_records_and_serves(tmp_path, exporter_factory):
    rec = tmp_path / "demo.llrec"
    exp = exporter_factory([str(rec), "--demo", "--interval", "1"], cmd="record")
    got = _wait_engines(exp.url, 3)
    assert ("llmtop_exporter_info", frozenset({("mode", "record"),
                                               ("version", _version())})) in got
    exp.stop()
    assert exp.proc.returncode == 0
    assert rec.stat().st_size > 1000  # the recording went on beside the exporter


def test_non_loopback_without_token_is_refused(tmp_path):
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "llmtop", "export", "127.0.0.1:9",
                          "--listen", "0.0.0.0:0", "--no-discover"], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 2
    assert "--listen-token-file" in out.stderr and "Traceback" not in out.stderr


def _version() -> str:
    from llmtop import __version__

    return __version__
