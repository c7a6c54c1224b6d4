"""``llmtop demo serve``: prints URLs, serves, exits 0 on SIGTERM / Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_demo_serve_prints_urls_and_exits_cleanly(sig):
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmtop", "demo", "serve", "--engines", "vllm,triton",
         "--seed", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        text = "".join(lines)
        assert "vllm@127.0.0.1:" in text and "triton@127.0.0.1:" in text
        assert "GPUs (JSON)" in text
        url = next(w for w in text.split() if w.endswith("/metrics"))
        assert url.startswith("http://127.0.0.1:")
        assert httpx.get(url, timeout=5).status_code == 200
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_unknown_scenario_is_an_error():
    r = subprocess.run([sys.executable, "-m", "llmtop", "demo", "serve", "--scenario", "nope"],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 2 and "unknown scenario" in r.stderr
