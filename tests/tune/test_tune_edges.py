"""Edges of the tuner's rules that a regression would pass unseen: the negatives of
``kv_room_left`` and ``seats_never_filled``, the limiter judged at the lowest missed level
when several miss, and the no-SLO "still grows 5 %" rule of ``level_met``."""

from __future__ import annotations

import pytest

from llmtop.tune.boundary import level_met
from llmtop.tune.limiter import judged_level, limiter
from llmtop.tune.rules import kv_room_left, seats_never_filled, skip_reason
from llmtop.tune.trial import empty_trial


def _lv(load, met, **kw):
    base = {"load": load, "met": met, "requests": 10, "running_peak": 4, "waiting_peak": 0,
            "kv_peak": 0.3, "preemptions": 0, "error_rate": 0.0, "duration_s": 10.0,
            "client_bound": False, "ttft_p95_s": 0.1, "tpot_p95_s": 0.02}
    base.update(kw)
    return base


def _trial(params, kind, levels, status="measured", **kw):
    t = empty_trial(params, "serve", status)
    t.update(limiter={"kind": kind, "evidence": f"{kind} evidence", "level": levels[-1]["load"]},
             levels=levels, **kw)
    return t


# -- kv_room_left: more KV memory is skipped only when the KV cache never got past 60 % ----

def test_kv_room_left_fires_when_the_kv_cache_stayed_low_under_a_seat_limit():
    t = _trial({"max_num_seqs": 8, "kv_tokens": 2048}, "seats",
               [_lv(4, True, kv_peak=0.3), _lv(8, False, kv_peak=0.5)])
    why = kv_room_left({"max_num_seqs": 8, "kv_tokens": 4096}, t)
    assert why and "never passed 50 %" in why


@pytest.mark.parametrize("case", ["kv-reached-60", "kv-bound", "less-memory", "failed",
                                  "other-param-differs", "kv-unknown"])
def test_kv_room_left_negatives(case):
    params = {"max_num_seqs": 8, "kv_tokens": 2048}
    cand = {"max_num_seqs": 8, "kv_tokens": 4096}
    levels = [_lv(4, True, kv_peak=0.3), _lv(8, False, kv_peak=0.5)]
    kind, status = "seats", "measured"
    if case == "kv-reached-60":
        levels[-1]["kv_peak"] = 0.6
    elif case == "kv-bound":
        kind = "kv"
    elif case == "less-memory":
        cand = {"max_num_seqs": 8, "kv_tokens": 1024}
    elif case == "failed":
        status = "failed"
    elif case == "other-param-differs":
        cand = {"max_num_seqs": 16, "kv_tokens": 4096}
    elif case == "kv-unknown":
        for lv in levels:
            lv["kv_peak"] = None
    t = _trial(params, kind, levels, status)
    assert kv_room_left(cand, t) is None


# -- seats_never_filled: more seats are skipped only when running never neared the limit --

def test_seats_never_filled_fires_below_95_percent_of_the_limit():
    t = _trial({"max_num_seqs": 16}, "compute", [_lv(8, True, running_peak=6),
                                                 _lv(16, False, running_peak=9)])
    why = seats_never_filled({"max_num_seqs": 32}, t)
    assert why and "peak 9" in why


@pytest.mark.parametrize("case", ["filled", "seat-bound", "fewer-seats", "engine-limit",
                                  "running-unknown"])
def test_seats_never_filled_negatives(case):
    cand = {"max_num_seqs": 32}
    levels = [_lv(8, True, running_peak=6), _lv(16, False, running_peak=9)]
    kind, applied = "compute", {}
    if case == "filled":
        levels[-1]["running_peak"] = 15.2  # 95 % of 16
    elif case == "seat-bound":
        kind = "seats"
    elif case == "fewer-seats":
        cand = {"max_num_seqs": 8}
    elif case == "engine-limit":
        applied = {"max_running": 9}  # the engine said its limit is 9: running filled it
    elif case == "running-unknown":
        for lv in levels:
            lv["running_peak"] = None
    t = _trial({"max_num_seqs": 16}, kind, levels, applied=applied)
    assert seats_never_filled(cand, t) is None
    if case == "filled":  # and no other rule skips it either
        assert skip_reason(cand, [t]) is None


# -- the limiter is judged at the lowest level that missed ---------------------------------

def test_the_lowest_missed_level_is_judged_when_several_miss():
    levels = [_lv(4, True),
              _lv(16, False, error_rate=0.3),  # higher: lost to errors
              _lv(8, False, running_peak=4, waiting_peak=5, kv_peak=0.4)]  # lower: seats
    assert judged_level(levels)["load"] == 8
    lim = limiter(levels, 4)
    assert lim["kind"] == "seats" and lim["level"] == 8 and "c=8" in lim["evidence"]
    # a level with no request finished is never the judged one
    levels.append(_lv(6, False, requests=0, error_rate=1.0))
    assert limiter(levels, 4)["level"] == 8


# -- no SLO set: a level counts while throughput still grows by 5 % -------------------------

@pytest.mark.parametrize("tok, best_below, met", [
    (105.0, 100.0, True),    # exactly 5 % more
    (104.9, 100.0, False),   # less than 5 % more: the plateau
    (90.0, 100.0, False),    # fell
    (50.0, None, True),      # the first level
])
def test_without_an_slo_a_level_counts_while_throughput_grows_5_percent(tok, best_below, met):
    step = {"output_tokens_per_s": tok, "error_rate": 0.0, "requests": 10}
    slo = {"ttft": None, "itl": None, "tpot": None}
    assert level_met(step, slo, 0.01, best_below) is met


def test_without_an_slo_errors_past_the_bound_never_count():
    step = {"output_tokens_per_s": 500.0, "error_rate": 0.02, "requests": 10}
    assert level_met(step, {"ttft": None}, 0.01, 100.0) is False
