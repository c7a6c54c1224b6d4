"""The tune HTML report opened in headless Chromium: the ranked table (skipped rows with
their reason), the recommended command, both Pareto fronts drawn (a dot per measured trial,
the front's trials labelled), no console error and no request but the page itself.
Skipped without Chromium unless ``LLMTOP_REQUIRE_CHROMIUM=1`` (as the bake-off's)."""

from __future__ import annotations

import pytest

from llmtop.report.tune import to_csv_text, write_html
from llmtop.tune.summary import summarize
from llmtop.tune.trial import empty_trial
from tests.loadgen.test_bakeoff_chromium import _requests, browser  # noqa: F401 (fixture)

pytest.importorskip("pygal")

DOTS_JS = """
return [...document.querySelectorAll('.chart svg')].map(svg => ({
  title: (svg.querySelector('.title') || {}).textContent || '',
  dots: svg.querySelectorAll('.series .dot, .series circle').length,
  labels: [...svg.querySelectorAll('text')].map(t => t.textContent),
  w: svg.getBoundingClientRect().width}));
"""


def report() -> dict:
    trials = []
    for seqs, rps, tok, ttft, kind in ((4, 5.0, 300.0, 0.15, "seats"),
                                       (8, 9.0, 600.0, 0.19, "seats"),
                                       (16, 8.0, 550.0, 0.25, "kv")):
        t = empty_trial({"max_num_seqs": seqs}, f"serve --max-num-seqs {seqs}")
        t.update(goodput_rps=rps, output_tok_s=tok, ttft_p95_s=ttft, gpus=1.0, sla_load=seqs,
                 cost_per_mtok_usd=2.5 / (tok * 3600) * 1e6, per_gpu={"output_tok_s": tok},
                 limiter={"kind": kind, "evidence": f"{kind} at c={seqs * 2}",
                          "level": seqs * 2},
                 levels=[{"load": seqs, "met": True, "output_tok_s": tok, "ttft_p95_s": ttft,
                          "tpot_p95_s": 0.02, "running_peak": seqs, "waiting_peak": 0,
                          "kv_peak": 0.5, "preemptions": 0, "errors": 0, "requests": 10}])
        trials.append(t)
    trials.append(empty_trial({"max_num_seqs": 32}, "serve --max-num-seqs 32", "skipped",
                              "max_num_seqs=16 was already KV-bound"))
    rep = {"kind": "tune", "objective": "goodput", "strategy": "adaptive", "trials": trials,
           "warnings": [], "traffic": {}}
    rep.update(summarize(trials, "goodput", {"ttft": 0.2}))
    return rep


def test_csv_has_a_row_per_trial_best_first():
    lines = to_csv_text(report()).splitlines()
    assert len(lines) == 5 and lines[1].startswith("1,1,max_num_seqs=8")
    assert "already KV-bound" in lines[-1] and ",–," in lines[-1]


def test_tune_html_opens_offline_with_both_fronts(browser, tmp_path):  # noqa: F811
    page = tmp_path / "tune.html"
    write_html(report(), str(page))
    browser.get("about:blank")
    browser.get_log("performance")
    browser.get_log("browser")
    browser.get(page.as_uri())
    body = browser.find_element("tag name", "body").text
    assert "serve --max-num-seqs 8" in body and "already KV-bound" in body
    charts = browser.execute_script(DOTS_JS)
    assert len(charts) == 2 and "TTFT p95" in charts[0]["title"] and "$" in charts[1]["title"]
    for c in charts:
        assert c["w"] > 300 and c["dots"] >= 3, c
        assert "#1" in " ".join(c["labels"])  # the front's trials are labelled
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert all(u.startswith("file://") for u in _requests(browser))
