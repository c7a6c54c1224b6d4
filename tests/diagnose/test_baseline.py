"""The baseline tracker (one point per 10 s, median, current window left out) and the
Diagnoser's hysteresis and start/end transitions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmtop.diagnose import BaselineTracker, Diagnoser
from llmtop.diagnose.thresholds import END_HOLD_S
from tests.diagnose.rows import healthy, q


def test_one_point_per_step_and_median_leaves_out_the_current_window():
    tr = BaselineTracker(step_s=10.0, keep_s=900.0)
    row = healthy()
    for i in range(100):  # 1 s ticks: one point per 10 s
        t = float(i)
        v = 0.1 if i < 70 else 5.0  # the last 30 s are an anomaly
        tr.observe(t, [replace(row, ttft_s=q(v, v, 60))])
    b = tr.baseline(row.key, 99.0, exclude_s=30.0)
    assert b is not None and b.points == 7
    assert b.get("ttft_p50") == 0.1
    assert b.get("kv") == 0.45
    assert b.get("spec_accept") is None  # never reported: no baseline for it


def test_no_baseline_before_three_points_and_old_points_expire():
    tr = BaselineTracker(step_s=10.0, keep_s=60.0)
    row = healthy()
    tr.observe(0.0, [row])
    tr.observe(10.0, [row])
    assert tr.baseline(row.key, 50.0, exclude_s=30.0) is None
    for t in range(20, 200, 10):
        tr.observe(float(t), [row])
    b = tr.baseline(row.key, 190.0, exclude_s=30.0)
    assert b is not None and b.points == 4  # [130, 160]


def test_rows_not_ok_give_no_points():
    tr = BaselineTracker()
    for t in range(0, 100, 10):
        tr.observe(float(t), [healthy(state="down")])
    assert tr.baseline(healthy().key, 100.0, 30.0) is None


def _feed(d: Diagnoser, t0: int, t1: int, row):
    out = []
    for t in range(t0, t1):
        d.observe(float(t), [row], [])
        out += d.update(float(t), [row], [], waiting_min={row.key: row.waiting or 0.0})
    return out


def test_diagnoser_starts_holds_and_ends_a_finding():
    d = Diagnoser(every_s=1.0)
    ok = healthy()
    bad = healthy(kv_cache_usage=0.99, waiting=20.0, preemptions_per_s=2.0)
    assert _feed(d, 0, 120, ok) == []
    tr = _feed(d, 120, 130, bad)
    assert [(x.kind, x.finding.rule) for x in tr] == [("start", "kv_pressure")]
    assert d.findings[0].rule == "kv_pressure"
    # back to healthy: held for END_HOLD_S, then ended once
    tr = _feed(d, 130, 130 + int(END_HOLD_S) - 1, ok)
    assert tr == [] and d.findings and d.findings[0].rule == "kv_pressure"
    tr = _feed(d, 130 + int(END_HOLD_S) - 1, 200, ok)
    assert [(x.kind, x.finding.rule) for x in tr] == [("end", "kv_pressure")]
    assert d.findings == []


def test_diagnoser_reports_worsening_once():
    d = Diagnoser(every_s=1.0)
    warn = healthy(kv_cache_usage=0.96, waiting=4.0)
    crit = healthy(kv_cache_usage=0.99, waiting=20.0, preemptions_per_s=2.0)
    kinds = [x.kind for x in _feed(d, 0, 5, warn) + _feed(d, 5, 10, crit)
             + _feed(d, 10, 12, warn) + _feed(d, 12, 14, crit)]
    assert kinds == ["start", "worse"]  # back to warn and critical again: no second line


def test_diagnoser_uses_its_baseline_for_relative_rules():
    d = Diagnoser(every_s=1.0)
    _feed(d, 0, 200, healthy())
    slow = healthy(itl_s=q(0.09, 0.12, 6000))
    tr = _feed(d, 200, 203, slow)
    assert [x.finding.rule for x in tr] == ["decode_slowdown"]


def test_reuse_s_keeps_a_row_s_medians_for_that_long():
    """Fleet mode (hundreds of rows, a refresh every 10 s) recomputes the medians once a
    minute (``reuse_s``); the default recomputes them each step."""
    row = healthy()
    for reuse in (None, 60.0):
        tr = BaselineTracker(step_s=10.0, keep_s=900.0, reuse_s=reuse)
        for i in range(8):  # 0..70 s: 0.05 for the first 40 s, then 0.1
            v = 0.05 if i < 4 else 0.1
            tr.observe(10.0 * i, [replace(row, ttft_s=q(v, v, 60))])
            if i == 3:
                assert tr.baseline(row.key, 30.0, exclude_s=0.0).get("ttft_p50") == 0.05
        got = tr.baseline(row.key, 70.0, exclude_s=0.0).get("ttft_p50")
        # the median of four 0.05 and four 0.1; reused: still the one worked out at 30 s
        assert got == pytest.approx(0.075 if reuse is None else 0.05), reuse
        got = tr.baseline(row.key, 95.0, exclude_s=0.0).get("ttft_p50")  # 65 s later: anew
        assert got == pytest.approx(0.075), reuse


def test_a_row_gone_for_longer_than_the_kept_past_is_forgotten():
    tr = BaselineTracker(step_s=10.0, keep_s=60.0)
    gone, stays = healthy(), replace(healthy(), key="vllm@127.0.0.2:8000|m", target="b")
    for t in range(0, 60, 10):
        tr.observe(float(t), [gone, stays])
    for t in range(60, 200, 10):  # ``gone``'s target was dropped: only ``stays`` is fed
        tr.observe(float(t), [stays])
        if t <= 110:  # its points are still within the kept past
            assert gone.key in tr._rows
    assert set(tr._rows) == {stays.key}  # a churning stack keeps a bounded tracker
    assert tr.baseline(stays.key, 190.0, exclude_s=30.0) is not None
