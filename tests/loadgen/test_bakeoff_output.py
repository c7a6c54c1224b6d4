"""Bake-off output: the console table, the CSV, the HTML page's content, and ``probe compare``
on a bake-off report. (Opening the page in a browser: test_bakeoff_chromium.py.)"""

from __future__ import annotations

import copy
import csv
import io
import json
import re

import pytest

from llmtop.cli.probe import compare_main
from llmtop.console.bakeoff_view import bakeoff_tables, print_bakeoff
from llmtop.errors import ConfigError
from llmtop.loadgen.bakeoff_summary import table_rows
from llmtop.loadgen.compare import load_runs
from llmtop.loadgen.report import CSV_COLUMNS
from llmtop.report.bakeoff import CSV_ENGINE_COLUMNS, bakeoff_html, to_csv_text

from .bakeoff_data import COMMAND, CORE, REAL, failed, real, synthetic

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Tty(io.StringIO):
    """A file that says it is a terminal (Rich then wraps to COLUMNS and colours)."""

    def isatty(self) -> bool:
        return True


def plain(report: dict) -> str:
    buf = io.StringIO()
    print_bakeoff(report, file=buf)
    return buf.getvalue()


def on_terminal(report: dict, monkeypatch: pytest.MonkeyPatch, columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("LINES", "24")
    monkeypatch.delenv("NO_COLOR", raising=False)
    buf = Tty()
    print_bakeoff(report, file=buf)
    return buf.getvalue()


def row_of(text: str, load: str) -> str:
    (line,) = [ln for ln in text.splitlines() if re.match(rf"\s*{re.escape(load)}\s", ln)]
    return line


# -- the table ----------------------------------------------------------------------------


def test_best_value_of_each_row_is_marked_in_plain_text():
    out = plain(synthetic())
    # c=16: fast 100*8 = 800 tok/s vs slow 60*4 = 240; TTFT p95 320 ms vs 800 ms
    cells = row_of(out, "c=16").split()
    assert cells[:6] == ["c=16", "800*", "160*", "320*", "20.0*", "0"]
    assert cells[6:] == ["240", "400", "800", "20.0*", "0"]  # ITL p95 tied: both marked
    assert "\x1b[" not in out  # a pipe gets no colour: the * carries the mark


def test_best_marked_on_the_real_fixture_matches_its_numbers():
    rep = real()
    for r in table_rows(rep):
        tps = [c["values"]["tps"] for c in r["engines"]]
        known = [round(v) for v in tps if v is not None]  # as shown: whole tok/s
        if len(known) < 2:
            assert not any("tps" in c["best"] for c in r["engines"])
            continue
        best = [i for i, c in enumerate(r["engines"]) if "tps" in c["best"]]
        assert best == [i for i, v in enumerate(tps) if v is not None
                        and round(v) == max(known)]


def test_equal_shown_values_are_both_best():
    rep = synthetic()
    a, b = (e["steps"][0] for e in rep["endpoints"])
    a["output_tokens_per_s"], b["output_tokens_per_s"] = 128.04, 127.96  # both show 128
    assert row_of(plain(rep), "c=1").split()[1::5][:2] == ["128*", "128*"]


def test_missing_is_a_dash_never_zero():
    rep = synthetic()
    slow = rep["endpoints"][1]
    slow["steps"] = [s for s in slow["steps"] if s["concurrency"] != 2]  # never ran c=2
    slow["server"] = {"running_peak": 5, "kv_peak": None}  # the rest unreported
    slow["cost_per_mtok_usd"] = None
    slow["cold_start_s"] = None
    out = plain(rep)
    assert row_of(out, "c=2").split()[6:] == ["–"] * 5
    assert ("running 5, waiting –, KV –, preemptions –, GPU memory –, GPU util –"
            in out)
    assert "cold start: – (not started by llmtop)" in out
    assert "$/1M out tokens: – (no GPU-hour price given)" in out


def test_failed_engine_gets_an_error_row_and_others_still_show():
    rep = synthetic()
    rep["endpoints"].insert(1, failed())
    out = plain(rep)
    assert "trt-engine  –  http://127.0.0.1:2  FAILED" in out
    assert "error: not ready after 600 s; last log lines: CUDA out of memory" in out
    assert row_of(out, "c=16").split()[6:11] == ["–"] * 5  # its columns: not measured
    assert "fast-engine" in out and "slow-engine" in out
    assert "warning: slow-engine: a warning sentence for the test." in out


def test_failed_engine_started_by_llmtop_shows_its_log():
    rep = synthetic()
    bad = failed()
    bad.update(log="/tmp/llmtop-bakeoff-x/trt.log", started_by_llmtop=True,
               log_tail="line 1\n\nTraceback (most recent call last):\nRuntimeError: OOM\n")
    rep["endpoints"].append(bad)
    out = plain(rep)
    assert "log: /tmp/llmtop-bakeoff-x/trt.log" in out
    assert "    | Traceback (most recent call last):\n    | RuntimeError: OOM" in out
    page = bakeoff_html(rep)
    assert ("<pre class='log'>line 1\nTraceback (most recent call last):\nRuntimeError: OOM"
            "</pre>") in page


def test_core_fields_settings_server_note_and_traffic():
    rep = synthetic()
    e = rep["endpoints"][0]
    e["settings"] = {"version": "0.5.2", "model": "m", "max_model_len": None,
                     "server_info": {"max_running_requests": 48, "mem_fraction_static": 0.85}}
    e["server"] = {"running_peak": 8, "max_running": 48, "gpu_memory_peak_bytes": 2**31,
                   "note": "GPU from NVML"}
    e["cold_start_s"], e["ready_s"] = 58.2, 55.0
    rep["endpoints"][1].update(cold_start_s=None, started_by_llmtop=True)
    rep["traffic"] = {"kind": "synthetic", "seed": 3, "requests_per_step": 32, "hash": None,
                      "identical": False}
    rep["partial"] = True
    out = plain(rep)
    assert ("settings: version=0.5.2, model=m, max_running_requests=48, "
            "mem_fraction_static=0.85") in out
    assert "running 8 (max 48), waiting –, KV –, preemptions –, GPU memory 2.0 GiB" in out
    assert "(GPU from NVML)" in out
    assert "cold start: 58.2 s (ready after 55.0 s)" in out
    assert "cold start: – (started by llmtop; no first token)" in out
    assert ("Traffic: synthetic, seed 3, 32 requests per step; the engines did NOT receive "
            "identical request lists; stopped early (partial report)") in out


def test_no_step_at_all_says_so():
    rep = {"kind": "bakeoff", "endpoints": [failed("a"), failed("b")], "traffic": None,
           "warnings": []}
    out = plain(rep)
    assert "No engine finished a step: no table." in out
    assert out.count("FAILED") == 2


def test_pipe_never_cuts_at_80_columns():
    rep = synthetic(4)
    out = plain(rep)
    header = [ln for ln in out.splitlines() if "fast-engine" in ln and "slow-engine" in ln]
    assert header, "on a pipe the four engines share one table"
    assert max(len(ln) for ln in out.splitlines()) > 80
    assert "…" not in out


def test_a_long_engine_name_is_never_cut_on_a_pipe_and_rows_stay_aligned():
    rep = synthetic()
    long = "vllm-0.11-llama-3.1-8b-instruct-fp8-tp1-max-num-seqs-256"
    rep["endpoints"][1]["name"] = long
    lines = plain(rep).splitlines()
    assert any(long in ln for ln in lines)
    head = next(i for i, ln in enumerate(lines) if long in ln)
    assert lines[head + 2].split()[0] == "load"  # one title line, then the two header lines
    assert row_of("\n".join(lines), "c=16").split()[:2] == ["c=16", "800*"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_80_column_terminal_stays_within_80_and_keeps_every_engine(monkeypatch, n):
    rep = synthetic(n)
    out = ANSI.sub("", on_terminal(rep, monkeypatch))
    assert max(len(ln) for ln in out.splitlines()) <= 80  # every character here is 1 cell
    names = [e["name"] for e in rep["endpoints"]]
    for name in names:
        assert any(name in ln for ln in out.splitlines()), name
    for r in ("c=1", "c=16"):  # every level, in every stacked block
        assert sum(1 for ln in out.splitlines() if re.match(rf"\s*{r}\s", ln)) == \
            len(bakeoff_tables(rep, 80))
    assert "800*" in out  # the mark survives colour
    assert "\x1b[" in on_terminal(rep, monkeypatch)  # and the colour is there too


def test_stacked_blocks_only_when_needed():
    assert len(bakeoff_tables(synthetic(2), 80)) == 1
    assert len(bakeoff_tables(synthetic(4), 80)) >= 2
    assert len(bakeoff_tables(synthetic(4), None)) == 1


def test_not_comparable_throughput_is_flagged_and_never_best():
    rep = synthetic()
    rep["endpoints"][0]["comparable"] = False
    rep["endpoints"][0]["short_outputs"] = 0.3
    out = plain(rep)
    assert row_of(out, "c=16").split()[1] == "800!"
    assert row_of(out, "c=16").split()[6] == "240"  # the only comparable one: not "best"
    assert "30% of requests ended before their max tokens; throughput not comparable" in out


def test_engine_block_lines():
    out = plain(synthetic())
    assert "fast-engine  vllm 0.11.0  http://127.0.0.1:1/fast-engine" in out
    assert "saturation: c=8 (knee c=7.2), 800 out tok/s" in out
    assert "SLA boundary: c=4 (TTFT p95 ≤ 500 ms), 240 out tok/s" in out
    assert "cold start: 61.5 s" in out
    assert "$/1M out tokens: $1.25 at the SLA boundary, $0.800 at max throughput" in out
    assert ("running 16, waiting 3, KV 42% of 430,016 tokens, preemptions 0, GPU memory "
            "70.0 GiB, GPU util 97%") in out
    assert "settings: max_num_seqs=256, gpu_memory_utilization=0.9" in out
    assert "Traffic: synthetic, seed 0, 64 requests per step; the same request list" in out
    assert "capacity: Holds 8.0 req/s (800 output tok/s)" in out


# -- CSV --------------------------------------------------------------------------------


def test_csv_one_row_per_engine_and_level():
    rep = real()
    rep["endpoints"].append(failed())
    rows = list(csv.DictReader(io.StringIO(to_csv_text(rep))))
    assert list(rows[0]) == [*CSV_ENGINE_COLUMNS, *CSV_COLUMNS]
    n_steps = sum(len(e["steps"]) for e in rep["endpoints"])
    assert len(rows) == n_steps + 1
    for e in rep["endpoints"][:2]:
        mine = [r for r in rows if r["name"] == e["name"]]
        assert [int(r["concurrency"]) for r in mine] == [s["concurrency"] for s in e["steps"]]
        for r, s in zip(mine, e["steps"], strict=True):
            assert float(r["output_tokens_per_s"]) == pytest.approx(s["output_tokens_per_s"])
            p95 = s["ttft_s"]["p95"]
            assert r["ttft_s_p95"] == ("" if p95 is None else str(p95))  # missing: empty
    (bad,) = [r for r in rows if r["name"] == "trt-engine"]
    assert bad["error"].startswith("not ready") and bad["concurrency"] == ""


# -- HTML content (the browser test opens it) ------------------------------------------------


def test_html_has_tables_curves_marks_and_nothing_external():
    rep = synthetic()
    rep["endpoints"].append(failed())
    page = bakeoff_html(rep)
    assert page.count("<svg") == 3
    for title in ("Output tok/s vs load", "TTFT p95 vs load", "TTFT p95 vs output tok/s"):
        assert title in page
    for mark in ("fast-engine: knee c=8", "fast-engine: SLA boundary c=16",
                 "slow-engine: knee = SLA boundary c=4"):
        assert mark in page
    assert "class='best'" in page or "class='first best'" in page
    assert "trt-engine failed: not ready after 600 s" in page
    assert not re.search(r"<script[^>]*\bsrc=", page)  # pygal's inline config only
    for bad in ("<link", "<img", "<iframe", "@import", "url(", "src=\"http", "src='http",
                "href=\"http", "href='http"):
        assert bad not in page


# -- probe compare --------------------------------------------------------------------------


def test_load_runs_expands_a_bakeoff_report(tmp_path):
    p = tmp_path / "b.json"
    rep = real()
    rep["endpoints"].append(failed())
    p.write_text(json.dumps(rep))
    runs, names, skipped = load_runs([str(p)])
    assert names == ["demo-vllm", "demo-triton"]
    assert [r["steps"] for r in runs] == [e["steps"] for e in rep["endpoints"][:2]]
    assert skipped == ["trt-engine: not ready after 600 s; last log lines: CUDA out of memory"]


def test_cli_compare_on_a_bakeoff_report(tmp_path, capsys):
    out_json = tmp_path / "cmp.json"
    out_html = tmp_path / "cmp.html"
    assert compare_main([str(REAL), "--json", str(out_json), "--html", str(out_html)]) == 0
    text = capsys.readouterr().out
    assert "A = demo-vllm (baseline), B = demo-triton" in text
    page = out_html.read_text()
    assert page.count("<svg") == 3 and "demo-triton: output tok/s" in page
    res = json.loads(out_json.read_text())
    assert res["names"] == ["demo-vllm", "demo-triton"]
    rep = real()
    vllm, triton = rep["endpoints"]
    rows = {r["concurrency"]: r for r in res["comparisons"][0]["rows"]}
    for s in vllm["steps"]:
        if not s["requests"]:
            continue
        assert rows[s["concurrency"]]["tokens_per_s"][0] == pytest.approx(
            s["output_tokens_per_s"])
    c1 = next(s for s in triton["steps"] if s["concurrency"] == 1)
    assert rows[1]["tokens_per_s"][1] == pytest.approx(c1["output_tokens_per_s"])


def test_cli_compare_mixes_a_probe_report_and_a_bakeoff(tmp_path, capsys):
    rep = real()
    probe = tmp_path / "probe.json"
    probe.write_text(json.dumps(rep["endpoints"][0]))
    assert compare_main([str(probe), str(REAL)]) == 0
    text = capsys.readouterr().out
    assert f"{REAL}:demo-triton vs {probe}" in text


def test_cli_compare_needs_two_runs(tmp_path, capsys):
    rep = copy.deepcopy(synthetic())
    rep["endpoints"][1] = failed()
    p = tmp_path / "one.json"
    p.write_text(json.dumps(rep))
    with pytest.raises(ConfigError, match="two runs"):
        compare_main([str(p)])
    assert "skipped trt-engine" in capsys.readouterr().err


@pytest.mark.parametrize("path", [
    COMMAND,
    pytest.param(CORE, marks=pytest.mark.skipif(
        not CORE.exists(), reason="tests/fixtures/bakeoff/demo-two-engines.json (the bake-off "
        "branch's own fixture) is not on this branch yet")),
], ids=["from-bakeoff-command", "demo-two-engines"])
def test_output_of_the_bakeoff_commands_own_report(path):
    rep = json.loads(path.read_text())
    out = plain(rep)
    names = [e.get("name") or e.get("url") or f"engine {i + 1}"
             for i, e in enumerate(rep["endpoints"])]
    for name in names:
        assert name in out
    tr = rep["traffic"]
    if isinstance(tr.get("requests_per_step"), dict) and len(
            set(tr["requests_per_step"].values())) == 1:
        n = next(iter(tr["requests_per_step"].values()))
        assert f"seed {tr['seed']}, {n} requests per step" in out
    elif isinstance(tr.get("requests_per_step"), dict):  # c=1: 16, c=4: 16, c=16: 64
        assert "requests per step " + ", ".join(
            f"c={k}: {v}" for k, v in tr["requests_per_step"].items()) in out
    if tr.get("hash"):
        assert f"(hash {tr['hash'][:12]})" in out
    assert "server_info=" not in out  # nested settings are flattened
    for e in rep["endpoints"]:
        for s in e.get("steps") or []:
            if s.get("requests"):
                assert f"{s['output_tokens_per_s']:,.0f}" in row_of(out, f"c={s['concurrency']}")
    rows = list(csv.DictReader(io.StringIO(to_csv_text(rep))))
    assert len(rows) == sum(max(1, len(e.get("steps") or [])) for e in rep["endpoints"])
    assert bakeoff_html(rep).count("<svg") == 3
    _runs, got, _skipped = load_runs([str(path)])
    assert got == [n for n, e in zip(names, rep["endpoints"], strict=True)
                   if any(s.get("requests") for s in e.get("steps") or [])]


def test_marks_at_the_same_place_share_one_label():
    page = bakeoff_html(synthetic(3))  # e3-engine is a copy of fast-engine
    shared = page.count(">fast-engine, e3-engine: knee c=8<")
    assert shared >= 3  # drawn in each of the three charts
    # alone, each name is only its legend entry: never two labels on top of each other
    assert page.count(">fast-engine: knee c=8<") == page.count(">e3-engine: knee c=8<") == 3
    assert page.count(">slow-engine: knee = SLA boundary c=4<") == shared + 3  # + legend
    two = synthetic(2)
    two["endpoints"][1] = copy.deepcopy(two["endpoints"][0]) | {"name": "twin"}
    assert bakeoff_html(two).count(">both: SLA boundary c=16<") == shared
