"""The worker process, stop/Ctrl-C with a partial report, the CLI, secrets, report shapes."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from llmtop.cli.probe import build_parser, confirm_target, resolve_api_key
from llmtop.loadgen import report as rep
from llmtop.loadgen.api import start_probe
from llmtop.loadgen.options import ProbeOptions, redact_url, split_url
from llmtop.urls import is_loopback

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET-1234"
STEP_KEYS = {"concurrency", "achieved_concurrency", "requests", "output_tokens", "duration_s",
             "requests_per_s", "output_tokens_per_s", "goodput_per_s", "ttft_s", "itl_s",
             "tpot_s", "e2e_s", "errors", "client_bound", "client_cpu", "loop_lag_ms"}


def test_stop_gives_partial_report_and_no_secret(slow_mock):
    h = start_probe(ProbeOptions(url=slow_mock.url, concurrency=8, duration=30,
                                 output_tokens=50, api_key=SECRET))
    seen = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        seen += h.wait(0.2)
        if sum(1 for e in seen if e["type"] == "progress") >= 3:
            break
    t = time.monotonic()
    h.stop()
    seen += h.wait(10)
    assert h.finished and time.monotonic() - t < 5
    report = h.result()
    assert report is not None and report["partial"] and report["stop_reason"] == "stopped"
    assert report["steps"] and report["steps"][0]["partial"]
    assert report["cancelled_in_flight"] > 0
    assert set(report["steps"][0]) >= STEP_KEYS
    types = [e["type"] for e in seen]
    assert types[-1] == "finished" and "step_started" in types and "step_done" in types
    blob = json.dumps(seen) + rep.to_json(report) + rep.to_csv(report) + rep.to_markdown(report)
    assert SECRET not in blob
    assert report["options"]["api_key_set"] is True


def test_cli_ctrl_c_writes_partial_report(slow_mock, tmp_path):
    out = tmp_path / "r.json"
    env = {**os.environ, "LLMTOP_API_KEY": SECRET, "COLUMNS": "120"}
    p = subprocess.Popen([sys.executable, "-m", "llmtop", "probe", slow_mock.url,
                          "--concurrency", "4", "--duration", "30", "--output-tokens", "50",
                          "--json", str(out), "--md", str(tmp_path / "r.md"),
                          "--csv", str(tmp_path / "r.csv")],
                         cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(7.0)  # past calibration and warm-up into the first step, also on a loaded box
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=15)
    assert p.returncode == 130, stderr
    data = json.loads(out.read_text())
    assert data["partial"] and data["steps"]
    assert {"target", "model", "started", "options", "steps", "saturation",
            "sla_boundary"} <= set(data)
    for f in ("r.json", "r.md", "r.csv"):
        assert SECRET not in (tmp_path / f).read_text()
    assert SECRET not in stdout + stderr


def test_non_loopback_refused_without_yes():
    assert is_loopback("127.0.0.1") and is_loopback("localhost")
    assert is_loopback("::1") and not is_loopback("10.0.0.1")
    assert not is_loopback("example.com")
    ok, msg = confirm_target("10.1.2.3", yes=False, interactive=False)
    assert not ok and "--yes" in msg
    assert confirm_target("10.1.2.3", yes=True, interactive=False) == (True, None)
    assert confirm_target("10.1.2.3", yes=False, interactive=True, ask=lambda q: "y")[0]
    assert not confirm_target("10.1.2.3", yes=False, interactive=True, ask=lambda q: "")[0]
    assert confirm_target("127.0.0.1", yes=False, interactive=False) == (True, None)


def test_cli_refuses_remote_without_yes_sends_nothing():
    r = subprocess.run([sys.executable, "-m", "llmtop", "probe", "http://192.0.2.1:8000",
                        "--duration", "1"], cwd=ROOT, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--yes" in r.stderr


def test_parser_interface_and_api_key_sources():
    ns = build_parser().parse_args([
        "http://h:1", "--concurrency", "3", "--rate", "2", "--poisson", "--sweep",
        "--max-concurrency", "8", "--duration", "5", "--max-requests", "9",
        "--prompt-tokens", "10", "--output-tokens", "11", "--length-dist", "normal",
        "--shared-prefix", "4:64", "--endpoint", "chat", "--model", "m", "--api-key", "k",
        "--ttft-slo", "1", "--itl-slo", "0.1", "--tpot-slo", "0.2", "--max-error-rate", "0.3",
        "--warmup", "1", "--step-duration", "2", "--json", "a", "--csv", "b", "--md", "c",
        "--yes", "--insecure"])
    assert ns.shared_prefix == "4:64" and ns.yes and ns.insecure and ns.poisson
    assert resolve_api_key("flag", {"LLMTOP_API_KEY": "env"}) == "flag"
    assert resolve_api_key(None, {"LLMTOP_API_KEY": "env"}) == "env"


def test_api_key_from_config_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('api_key = "top"\n[[targets]]\nurl = "http://127.0.0.1:9"\n'
                   'api_key = "per-target"\n')
    env = {"LLMTOP_CONFIG": str(cfg)}
    assert resolve_api_key(None, env, base_url="http://127.0.0.1:9") == "per-target"
    assert resolve_api_key(None, env, base_url="http://127.0.0.1:10") == "top"
    assert resolve_api_key(None, {"LLMTOP_CONFIG": str(tmp_path / "missing.toml")}) is None
    assert SECRET not in repr(ProbeOptions(url="x", api_key=SECRET))
    assert split_url("http://h:8000/v1/chat/completions") == ("http://h:8000", "h", "chat")
    assert split_url("127.0.0.1:9/v1") == ("http://127.0.0.1:9", "127.0.0.1", None)


def _report():
    q = {"p50": 0.1, "p90": 0.2, "p95": 0.3, "p99": 0.4, "mean": 0.15}
    step = {"index": 0, "concurrency": 4, "rate": None, "achieved_concurrency": 3.9,
            "achieved_rate": 1.0, "requests": 10, "errors_total": 1, "error_rate": 0.09,
            "output_tokens": 100, "prompt_tokens": 50, "duration_s": 10.0,
            "requests_per_s": 1.0, "output_tokens_per_s": 10.0, "goodput_per_s": 0.9,
            "ttft_s": q, "itl_s": q, "itl_request_s": q, "tpot_s": q, "e2e_s": q,
            "errors": {"http_503": 1}, "retry_after": {"count": 1, "wait_s": 1.0},
            "client_bound": False, "client_cpu": 0.1, "loop_lag_ms": 0.5, "partial": False}
    return {"target": "http://127.0.0.1:1/v1/completions", "model": "m", "started": "x",
            "options": {}, "steps": [step], "saturation": None, "sla_boundary": None,
            "max_throughput": None, "stop_reason": "done"}


def test_report_shapes():
    r = _report()
    assert json.loads(rep.to_json(r))["steps"][0]["ttft_s"]["p95"] == 0.3
    rows = list(csv.DictReader(io.StringIO(rep.to_csv(r))))
    assert len(rows) == 1 and rows[0]["ttft_s_p95"] == "0.3"
    assert rows[0]["errors"] == "http_503=1" and rows[0]["concurrency"] == "4"
    md = rep.to_markdown(r)
    assert "| 1 | c=4 |" in md and "http_503: 1" in md


def test_console_summary_renders():
    from rich.console import Console  # noqa: TID251 - testing the console layer

    from llmtop.console.probe_view import ProbeLiveView, print_summary

    con = Console(file=io.StringIO(), width=100)
    print_summary(_report(), console=con)
    text = con.file.getvalue()
    assert "c=4" in text and "http_503:1" in text and "0.90" in text
    v = ProbeLiveView(ProbeOptions(url="http://127.0.0.1:1"), console=con)
    v.update({"type": "step_started", "step": 0, "concurrency": 4, "rate": None,
              "steps_planned": 1})
    v.update({"type": "progress", "phase": "measure", "in_flight": 4,
              "achieved_concurrency": 3.9, "requests_done": 5, "requests_total": 5,
              "output_tokens_per_s": 100.0, "ttft_p50_s": 0.1, "ttft_p95_s": 0.2,
              "errors": {}})
    con.print(v.render())
    assert "3.9" in con.file.getvalue()


def test_redacted_url_keeps_an_ipv6_host_readable():
    assert redact_url("http://u:secret@[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert redact_url("http://u:secret@h:8000/v1?x=1") == "http://h:8000/v1?x=1"
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
