"""``llmtop demo serve``: prints URLs, serves, exits 0 on SIGTERM / Ctrl-C."""

from __future__ import annotations

import os
import re
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


def test_a_log_dir_that_cannot_be_made_is_an_error(tmp_path):
    """``--log-dir`` under a file: one clear line and status 2, no traceback."""
    (tmp_path / "file").write_text("")
    r = subprocess.run([sys.executable, "-m", "llmtop", "demo", "serve", "--log-dir",
                        str(tmp_path / "file" / "logs")],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"llmtop demo: --log-dir {tmp_path}/file/logs: Not a directory"


def test_help_lists_every_scenario():
    """``llmtop --help`` and ``llmtop demo serve --help`` name every scenario there is."""
    from llmtop.cli.demo import build_parser as demo_parser
    from llmtop.cli.main import build_parser
    from llmtop.demo.scenarios import SCENARIOS

    def words(text: str) -> set[str]:  # argparse wraps "kv-pressure" as "kv-\npressure"
        return set(re.findall(r"[A-Za-z_][\w-]*", " ".join(text.split()).replace("- ", "-")))

    main_help = words(build_parser().format_help())
    serve = next(a for a in demo_parser()._subparsers._group_actions[0].choices.values())
    serve_help = words(serve.format_help())
    names = set(SCENARIOS) - {"default"}
    assert names <= main_help, names - main_help
    assert names <= serve_help, names - serve_help
    assert "LLMTOP_DEMO_BASELINE_S" in main_help
