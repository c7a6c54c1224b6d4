"""Sparkline cells over minutes: each cell the max of its samples (a spike stays visible),
all-gap cells blank, cells aligned to absolute sample positions (no jitter), as many samples
a cell as it takes to show up to 5 minutes, and the span shown in words."""

from __future__ import annotations

import math

import pytest

from llmtop.ui import fmt


def test_each_cell_is_the_max_of_its_samples():
    assert fmt.spark_cells([1.0, 5.0, 2.0, 3.0, None, 4.0], 2, per_cell=3) == [5.0, 4.0]
    s = fmt.sparkline([1.0, 5.0, 2.0, 3.0, None, 4.0], 2, per_cell=3)
    assert s == "█▁"  # 5 then 4: the scale is over the cells shown


def test_a_cell_of_gaps_is_blank_never_zero():
    values = [1.0, 2.0, None, None, 3.0, None, 0.0, 0.0]
    assert fmt.spark_cells(values, 4, per_cell=2) == [2.0, None, 3.0, 0.0]
    s = fmt.sparkline(values, 4, per_cell=2)
    assert s[1] == " " and s[3] == "▁" and all(ch != " " for ch in s[::2])
    assert fmt.sparkline([None] * 9, 3, per_cell=3) == "   "


def test_a_one_sample_spike_is_the_tallest_block():
    """15 samples, 5 a cell: the spike's cell averages less than its neighbour, yet shows as
    the tallest block (an average would hide it)."""
    values = [3.0] * 5 + [1.0, 1.0, 9.0, 1.0, 1.0] + [2.0] * 5
    assert sum(values[5:10]) / 5 < 3.0
    s = fmt.sparkline(values, 3, per_cell=5)
    assert s[1] == "█" and max(s, key=fmt.BLOCKS.index) == s[1] and s.count("█") == 1
    # however many samples a cell holds: all 15 in one cell still reads as the spike
    assert fmt.spark_cells(values, 1, per_cell=15) == [9.0]


def test_one_sample_a_cell_is_unchanged():
    values = [float(i) for i in range(100)]
    assert fmt.sparkline(values, 20) == fmt.sparkline(values, 20, per_cell=1, end=1000)
    assert fmt.spark_cells(values, 20) == values[-20:]


def _series(n: int) -> list[float | None]:
    return [None if i % 17 == 5 else float((i * 7919) % 23) for i in range(n)]


@pytest.mark.parametrize("k", [2, 5, 15])
def test_a_new_sample_changes_only_the_newest_cell_until_it_is_complete(k):
    width = 12
    full = _series(400)
    for n in range(width * k + 1, 400):
        before = fmt.spark_cells(full[:n], width, k, end=n)
        after = fmt.spark_cells(full[:n + 1], width, k, end=n + 1)
        assert len(before) == len(after) == width
        if n % k:  # the newest cell is still filling: the others stay
            assert after[:-1] == before[:-1]
        else:  # it was complete: the picture shifts left by one, a new cell starts
            assert after[:-1] == before[1:] and after[-1] == full[n]


def test_cells_follow_absolute_positions_not_the_newest_end():
    """Reading only the newest points (a bounded ring, or ``last``) gives the same cells, as
    long as ``end`` says where they end; a cell only partly read is left out, not shown
    short."""
    full = _series(400)
    k, width = 15, 21
    for n in (315, 316, 329, 330, 399):
        whole = fmt.spark_cells(full[:n], width, k, end=n)
        for read in (width * k, width * k + 7, 2 * width * k):
            assert fmt.spark_cells(full[max(0, n - read):n], width, k, end=n) == whole
    # the newest 100 points of 330 (positions 230..329): cells 16..21 (240..329) are whole,
    # cell 15 (225..239) is not: it is left out
    bounds = fmt.spark_bounds(100, width, k, end=330)
    assert bounds == [(lo, lo + 15) for lo in range(10, 100, 15)]
    assert fmt.spark_bounds(0, width, k, end=330) == []


def test_a_fresh_start_fills_from_the_right_at_one_sample_a_cell():
    assert fmt.spark_plan(0, 21, 300) == (1, 0)
    assert fmt.spark_plan(10, 21, 300) == (1, 10)
    assert fmt.spark_plan(21, 21, 300) == (1, 21)
    k, _ = fmt.spark_plan(3, 21, 300)
    assert fmt.sparkline([1.0, 2.0, 3.0], 21, k, end=3) == "▁▄█"  # the panel pads the left


@pytest.mark.parametrize(("end", "width", "span", "k"), [
    (22, 21, 300, 2),     # just over the width: two a cell, all history shown
    (120, 21, 300, 6),
    (300, 21, 300, 15),   # 5 minutes at 1 s in 21 cells
    (5000, 21, 300, 15),  # never more a cell than the span asks
    (5000, 138, 300, 3),  # a wide sparkline shows a little more than the span
    (5000, 21, 600, 29),  # 0.5 s: 600 samples
    (5000, 400, 300, 1),
])
def test_samples_a_cell_adapt_to_the_history_up_to_the_span(end, width, span, k):
    got_k, last = fmt.spark_plan(end, width, span)
    assert got_k == k == max(1, math.ceil(min(end, span) / width))
    assert last <= width * k and last <= end
    # what is read makes whole cells (the newest may be filling) and fills the width
    cells = fmt.spark_bounds(last, width, k, end=end)
    assert len(cells) == min(width, math.ceil(end / k))
    assert sum(hi - lo for lo, hi in cells) == last


def test_span_words_and_seconds():
    assert [fmt.fmt_span(s) for s in (0, 21, 40, 99, 120, 240, 300, 315, 3600, 7200)] == [
        "0s", "21s", "40s", "99s", "2m", "4m", "5m", "5m", "60m", "2h"]
    times = [1000.0 + 2 * i for i in range(10)]  # one point every 2 s
    assert fmt.spark_span_s(times, 10, 1.0) == pytest.approx(20.0)
    assert fmt.spark_span_s(times, 3, 1.0) == pytest.approx(6.0)
    assert fmt.spark_span_s([], 30, 2.0) == 60.0  # no times: samples x interval
    assert fmt.spark_span_s(times, 0, 1.0) == 0.0
