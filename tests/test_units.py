"""llmtop/units.py: each style of each unit, pinned, and None always a dash."""

from __future__ import annotations

import pytest

from llmtop import units as u


@pytest.mark.parametrize("f", [u.secs, u.secs_words, u.secs_fine, u.ms_words, u.pct,
                               u.pct_words, u.pct_change, u.count, u.fixed, u.rate,
                               u.rate_fine, u.tokens_words, u.size, u.byte_rate])
def test_none_is_a_dash_never_zero(f):
    assert f(None) == u.DASH == "\u2013"


@pytest.mark.parametrize(("f", "v", "text"), [
    (u.secs, 3e-5, "30µs"), (u.secs, 0.42, "420ms"), (u.secs, 1.8, "1.8s"),
    (u.secs, 120.4, "120s"),
    (u.secs_words, 0.085, "85 ms"), (u.secs_words, 3.21, "3.2 s"),
    (u.secs_fine, 0.0085, "8.5 ms"), (u.secs_fine, 0.085, "85 ms"), (u.secs_fine, 1.234, "1.23 s"),
    (u.ms_words, 1.25, "1250 ms"),
    (u.pct, 0.973, "97%"), (u.pct_words, 0.62, "62 %"), (u.pct_change, 0.12, "+12%"),
    (u.pct_change, -0.03, "-3%"),
    (u.count, 812, "812"), (u.count, 1862, "1.9k"), (u.count, 61_000, "61k"),
    (u.count, 1.5e6, "1.5M"),
    (u.fixed, 4.4, "4"), (u.fixed, 2.0, "2"),
    (u.rate, 0.0, "0"), (u.rate, 2.54, "2.5"), (u.rate, 42.0, "42"), (u.rate, 1234.0, "1.2k"),
    (u.rate_fine, 2.5, "2.50"), (u.rate_fine, 42.0, "42.0"), (u.rate_fine, 420.0, "420"),
    (u.tokens_words, 812.4, "812 tokens"),
    (u.size, 512, "512B"), (u.size, 1536, "1.5K"), (u.size, 80 * 1024**3, "80.0G"),
    (u.size, 140 * 1024**3, "140G"),
    (u.byte_rate, 512, "512B/s"), (u.byte_rate, 1.25e9, "1.25GB/s"),
])
def test_each_style(f, v, text):
    assert f(v) == text


def test_ages_and_spans_fit_four_cells():
    assert [u.age(x) for x in (12.3, 999.4, 1000.0, 360_000.0, 4e6)] == [
        "12s", "999s", "17m", "100h", "46d"]
    assert [u.span(x) for x in (40.2, 300.0, 7200.0)] == ["40s", "5m", "2h"]


def test_fixed_takes_its_decimals():
    assert (u.fixed(2.456, 1), u.fixed(2.456, 2), u.fixed(1234.5, 0)) == ("2.5", "2.46", "1234")


def test_the_faces_use_the_units():
    """The TUI's cells, the rules' sentences and the --once table are these functions."""
    from llmtop.console import once_table
    from llmtop.diagnose import context
    from llmtop.ui import fmt

    assert (fmt.fmt_s, fmt.fmt_pct, fmt.fmt_num, fmt.fmt_bytes) == (
        u.secs, u.pct, u.count, u.size)
    assert (context.fmt_s, context.fmt_pct, context.fmt_tok) == (
        u.secs_words, u.pct_words, u.tokens_words)
    assert once_table.fmt_latency.__globals__["secs_fine"] is u.secs_fine
    from llmtop.console import probe_view
    from llmtop.diagnose import request_citations
    from llmtop.tune import trial

    for module in (once_table, probe_view, trial):
        assert vars(module)["fixed"] is u.fixed
    assert vars(request_citations)["count"] is u.count


def test_windows_name_whole_minutes():
    assert [u.window(x) for x in (10.0, 30.0, 60.0, 90.0, 300.0)] == [
        "10s", "30s", "1m", "90s", "5m"]
