"""The worker's running count of measured requests already past the TTFT SLO (progress
events' ``ttft_slo_missed``, with ``requests_planned``): what lets the tuner stop a level
whose p95 is lost beyond doubt. Counted in flight, before the late requests finish."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.stats import p95_lost, percentiles
from tests.loadgen.conftest import probe


def _opts(url, **kw):
    base = {"model": "m", "levels": (2,), "requests_per_step": 8, "warmup": 0,
            "output_tokens": 8, "prompt_tokens": 16, "endpoint": "completions",
            "progress_interval": 0.05}
    base.update(kw)
    return ProbeOptions(url=url, **base)


def _measuring(events):
    return [e for e in events if e["type"] == "progress" and e["phase"] == "measure"]


async def test_requests_past_the_slo_are_counted_while_still_in_flight(slow_mock):
    # TTFT 200 ms against an SLO of 100 ms: every request is late, and is counted as late
    # from 100 ms after it was sent, long before it finishes (~360 ms)
    report, events = await probe(_opts(slow_mock.url, ttft_slo=0.1))
    prog = _measuring(events)
    assert prog and all(e["requests_planned"] == 8 for e in prog)
    early = [e for e in prog if e["requests_done"] == 0 and e["ttft_slo_missed"]]
    assert early, [(e["requests_done"], e["ttft_slo_missed"]) for e in prog]
    assert early[0]["ttft_slo_missed"] <= 2  # no more than are in flight (c=2)
    assert max(e["ttft_slo_missed"] for e in prog) <= 8
    assert report["steps"][0]["ttft_s"]["p50"] > 0.1


async def test_none_missed_under_a_generous_slo_and_none_counted_without_one(slow_mock):
    _, events = await probe(_opts(slow_mock.url, ttft_slo=1.0))
    assert {e["ttft_slo_missed"] for e in _measuring(events)} == {0}
    _, events = await probe(_opts(slow_mock.url))
    assert {e["ttft_slo_missed"] for e in _measuring(events)} == {None}


@given(st.integers(1, 300), st.integers(0, 300), st.integers(0, 2**32 - 1))
def test_p95_lost_exactly_when_no_outcome_of_the_rest_can_save_the_p95(n, late, seed):
    late = min(late, n)
    rng = random.Random(seed)
    slo = 1.0
    # the best case: everything not yet late finishes instantly, and the late ones are only
    # just past the SLO (far past it, fewer can lose the p95: 13 of 242 at 2 s put the
    # interpolated p95 at 0.95 x 2 s; at 1.000001 s they do not)
    best = [slo * (1 + 1e-6 * (1 + rng.random())) for _ in range(late)] + [0.0] * (n - late)
    lost = percentiles(best)["p95"] > slo
    assert p95_lost(late, n) == lost


@pytest.mark.parametrize("late, n, lost", [(0, 8, False), (1, 8, False), (2, 8, True),
                                           (7, 128, False), (8, 128, True), (13, 242, False),
                                           (14, 242, True), (None, 8, False),
                                           (3, None, False)])
def test_p95_lost_table(late, n, lost):
    assert p95_lost(late, n) is lost
