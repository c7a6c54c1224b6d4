"""The tune HTML report names each trial as its table does (``#rank``) in the Pareto charts
and the trial sections, and its charts keep every point off the axes."""

from __future__ import annotations

import re

import pytest

from llmtop.report.charts import _padded
from llmtop.report.tune import tune_html
from llmtop.tune.summary import table_rows
from tests.tune.test_tune_chromium import report

pytest.importorskip("pygal")


def test_charts_and_sections_use_the_tables_numbers():
    rep = report()
    rank_of = {r["params"]: r["rank"] for r in table_rows(rep) if r["rank"] != "–"}
    assert rank_of == {"max_num_seqs=8": "1", "max_num_seqs=16": "2", "max_num_seqs=4": "3"}
    html = tune_html(rep)
    for params, rank in rank_of.items():
        assert f"<h3>#{rank} {params}</h3>" in html
    charts = re.findall(r"<div class='chart'>(.*?)</div>", html, re.S)
    assert len(charts) == 2
    for svg in charts:
        labels = set(re.findall(r">(#\d+)<", svg))
        assert labels == {"#1", "#2", "#3"}, labels


def test_chart_range_leaves_a_margin_round_the_points():
    assert _padded([121.0, 198.0]) == pytest.approx((113.3, 205.7))
    assert _padded([5.0, 5.0]) == pytest.approx((4.5, 5.5))  # one value: a margin of its own
    assert _padded([0.0, 10.0]) == (0.0, 11.0)  # never below 0 for values that are not
    assert _padded([-4.0, 4.0]) == pytest.approx((-4.8, 4.8))
