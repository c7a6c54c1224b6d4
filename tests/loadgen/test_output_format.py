"""Issue 15, probe output: nothing cut on a pipe, readable SLO and loads, whole headers."""

from __future__ import annotations

import io

from rich.console import Console  # noqa: TID251 - testing the console layer

from llmtop.console.probe_view import COLUMNS, print_summary
from llmtop.loadgen import report as rep


def _q(v: float) -> dict:
    return {"p50": v, "p90": v, "p95": v, "p99": v, "mean": v}


def _step(i: int, conc: int | None, rate: float | None, tps: float) -> dict:
    return {"index": i, "concurrency": conc, "rate": rate, "achieved_concurrency": 123.456,
            "achieved_rate": 1.0, "requests": 10, "errors_total": 0, "error_rate": 0.0,
            "output_tokens": 100, "prompt_tokens": 50, "duration_s": 10.0,
            "requests_per_s": 12345.678, "output_tokens_per_s": tps,
            "goodput_per_s": 12345.678, "ttft_s": _q(0.25), "itl_s": _q(0.01),
            "itl_request_s": _q(0.01), "tpot_s": _q(0.01), "e2e_s": _q(1.5),
            "errors": {"http_503": 1234567}, "retry_after": {"count": 0, "wait_s": 0.0},
            "client_bound": True, "client_bound_reasons": ["client CPU 0.99 cores"],
            "partial": False}


def _report(rate: bool = False) -> dict:
    steps = [_step(i, None if rate else 8 * 2**i, 8.0 * 2**i if rate else None,
                   1234567.0 * (i + 1)) for i in range(3)]
    key = "rate" if rate else "concurrency"
    load = steps[1][key]
    return {"target": "http://127.0.0.1:1/v1/completions", "model": "a-very-long-model-name",
            "started": "x", "options": {"sweep": True}, "steps": steps,
            "saturation": {key: load, "knee_load": 12.5, "step": 1,
                           "output_tokens_per_s": 2469134.0, "requests_per_s": 1.0},
            "max_throughput": {key: load, "step": 1, "output_tokens_per_s": 1.0,
                               "requests_per_s": 1.0},
            "sla_boundary": {key: load, "step": 1, "met": True, "goodput_per_s": 3.0,
                             "requests_per_s": 3.0, "output_tokens_per_s": 300.0,
                             "slo": {"ttft": 0.5, "itl": None, "tpot": None}},
            "stop_reason": "ladder_done"}


def test_piped_summary_is_never_cut():
    out = io.StringIO()
    print_summary(_report(), console=Console(file=out, width=80))
    text = out.getvalue()
    assert "\u2026" not in text, text
    lines = text.splitlines()
    for col in COLUMNS:  # two-line headers: each line of each header, whole
        for part in col.split("\n"):
            assert any(part in ln for ln in lines[:8]), part
    assert "2469134" in text and "3703701" in text and "http_503:1234567" in text
    assert text.endswith("\n\n"), "a blank line ends the summary (before 'wrote FILE')"


def test_terminal_summary_fits_80_columns_whole():
    out = io.StringIO()
    con = Console(file=out, width=80, force_terminal=True, color_system=None)
    rep = _report()
    for s in rep["steps"]:
        s.update(requests_per_s=28.33, goodput_per_s=15.66, output_tokens_per_s=179000.0,
                 achieved_concurrency=255.9, errors={})
    from llmtop.console.probe_view import summary_table

    con.print(summary_table(rep))
    text = out.getvalue()
    assert "\u2026" not in text, text
    assert "179000" in text and "255.9" in text


def test_markdown_slo_and_loads_are_written_for_people():
    for rate in (False, True):
        md = rep.to_markdown(_report(rate))
        assert "{'ttft'" not in md and "SLO: TTFT p95 \u2264 500 ms" in md
        if rate:
            assert "| 16 req/s |" in md and "**SLA boundary:** 16 req/s" in md
            assert "knee at 12.5 req/s" in md and "**Saturation point:** 16 req/s" in md
        else:
            assert "| c=16 |" in md and "**SLA boundary:** c=16" in md
            assert "knee at c=12.5" in md and "**Saturation point:** c=16" in md


def test_slo_text():
    assert rep.slo_text({"ttft": 0.5, "itl": 0.05, "tpot": None}) == \
        "TTFT p95 \u2264 500 ms, ITL p95 \u2264 50 ms"
    assert rep.slo_text({"ttft": 2.0}) == "TTFT p95 \u2264 2 s"
    assert rep.slo_text({}) == "no SLO"


def test_cli_summary_on_a_pipe_is_whole(fast_mock, tmp_path):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "llmtop", "probe", fast_mock.url, "--concurrency",
                        "2", "--max-requests", "6", "--output-tokens", "4", "--md",
                        str(tmp_path / "r.md")], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=60, env={"COLUMNS": "80", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "\u2026" not in r.stdout, r.stdout
    assert "goodput" in r.stdout and "TTFT" in r.stdout and "c=2" in r.stdout
    assert r.stdout.endswith("\n\n") and "wrote" in r.stderr
    md = (tmp_path / "r.md").read_text()
    assert "| 1 | c=2 |" in md  # steps counted from 1, as the live view does
