"""Formatting at the edge: None is a dash, gaps stay gaps, badges say the state in words."""

from __future__ import annotations

import pytest

from llmtop.model import EngineRow, Quantiles
from llmtop.ui import fmt
from llmtop.ui.state import INTERVALS, next_interval


def test_none_is_a_dash_never_zero():
    for f in (fmt.fmt_num, fmt.fmt_rate, fmt.fmt_pct, fmt.fmt_s, fmt.fmt_bytes):
        assert f(None) == fmt.DASH
    assert fmt.fmt_rate(0.0) == "0"
    assert fmt.quantile_text(None, "p95") == fmt.DASH
    assert fmt.quantile_text(Quantiles(), "p95") == fmt.DASH


def test_units():
    assert fmt.fmt_s(0.42) == "420ms" and fmt.fmt_s(1.8) == "1.8s" and fmt.fmt_s(3e-5) == "30µs"
    assert fmt.fmt_num(1862) == "1.9k" and fmt.fmt_num(25) == "25"
    assert fmt.fmt_pct(0.973) == "97%"
    assert fmt.fmt_bytes(80 * 1024**3) == "80.0G"


def test_quantile_bounds_are_marked():
    assert fmt.quantile_text(Quantiles(p95=0.1, below=("p95",)), "p95") == "<100ms"
    assert fmt.quantile_text(Quantiles(p95=60.0, above=("p95",)), "p95") == ">60.0s"


def test_sparkline_keeps_gaps():
    s = fmt.sparkline([1.0, None, 3.0, None, 2.0], 5)
    assert s[1] == " " and s[3] == " " and s[0] != " "
    assert fmt.sparkline([None, None], 2) == "  "
    assert len(fmt.sparkline([float(i) for i in range(100)], 20)) == 20


def test_bar():
    assert fmt.bar(None, 4, "gauge-ok").plain == "····"
    assert fmt.bar(1.0, 4, "gauge-ok").plain == "████"
    assert fmt.bar(0.001, 4, "gauge-ok").plain[0] != "·"  # anything above zero shows
    assert len(fmt.bar(0.5, 7, "gauge-ok").plain) == 7


def test_trend_arrow():
    assert fmt.trend_arrow([1.0] * 6 + [2.0] * 6) == "↑"
    assert fmt.trend_arrow([2.0] * 6 + [1.0] * 6) == "↓"
    assert fmt.trend_arrow([1.0] * 12) == "→"
    assert fmt.trend_arrow([None, 1.0]) == " "


@pytest.mark.parametrize(("state", "extra", "full", "at_11"), [
    ("ok", {}, "ok", "ok"),
    ("down", {}, "DOWN", "DOWN"),
    ("stale", {"last_ok_age_s": 12.3}, "STALE 12s", "STALE 12s"),
    ("stale", {"last_ok_age_s": 125.0}, "STALE 125s", "STALE 125s"),
    ("stale", {"last_ok_age_s": 999.4}, "STALE 999s", "STALE 999s"),
    ("stale", {"last_ok_age_s": 1000.0}, "STALE 17m", "STALE 17m"),
    ("stale", {"last_ok_age_s": 7 * 86400.0}, "STALE 168h", "STALE 168h"),
    ("stale", {"last_ok_age_s": 90 * 86400.0}, "STALE 90d", "STALE 90d"),
    ("bad_payload", {}, "BAD PAYLOAD", "BAD PAYLOAD"),
    ("restarted", {}, "RESTARTED", "RESTARTED"),
    ("http_error", {"http_status": 503}, "HTTP 503", "HTTP 503"),
    ("unauthorized", {}, "UNAUTHORIZED", "NO AUTH"),
])
def test_badges(state, extra, full, at_11):
    """The spec's words; only UNAUTHORIZED has a short form, for an 11-cell state column."""
    row = EngineRow(key="t|m", target="t", state=state, **extra)
    assert fmt.badge(row).plain == full
    assert fmt.badge(row, width=fmt.BADGE_WIDTH).plain == full
    assert fmt.badge(row, width=11).plain == at_11
    assert len(at_11) <= 11


def test_unknown_state_badge_is_marked_when_cut():
    row = EngineRow(key="t|m", target="t", state="something_new")
    assert fmt.badge(row).plain == "SOMETHING_NEW"
    assert fmt.badge(row, width=11).plain == "SOMETHING_…"


def test_row_names():
    assert fmt.row_name(EngineRow(key="k", target="vllm@127.0.0.1:8000", model="m")) == \
        "vllm :8000 m"
    assert fmt.row_name(EngineRow(key="k", target="t", rank="1")) == " └ rank 1"


def test_interval_steps():
    assert next_interval(1.0, 1) == 2.0 and next_interval(1.0, -1) == 0.5
    assert next_interval(INTERVALS[-1], 1) == INTERVALS[-1]
    assert next_interval(INTERVALS[0], -1) == INTERVALS[0]
    assert next_interval(1.5, -1) == 1.0


def test_compact_target_and_model_names():
    assert fmt.compact_target("vllm@127.0.0.1:41305") == "vllm :41305"
    assert fmt.compact_target("vllm@gpu-3:8000") == "vllm gpu-3:8000"
    assert fmt.compact_target("127.0.0.1:8000") == ":8000"
    assert fmt.model_short("meta-llama/Llama-3.1-8B-Instruct") == "Llama-3.1-8B-Instruct"
    assert fmt.model_short("/models/qwen2.5-7b/") == "qwen2.5-7b"
    assert fmt.model_short(None) == ""
    full = "meta-llama/Llama-3.1-8B-Instruct"
    assert fmt.fit_model(full, 40) == full  # the full name when it fits
    assert fmt.fit_model(full, 21) == "Llama-3.1-8B-Instruct"  # else the short name
    assert fmt.fit_model(full, 12) == "Llama-3.1-8…"  # cut only when even that is too long
    assert fmt.fit_model(full, 0) == ""
