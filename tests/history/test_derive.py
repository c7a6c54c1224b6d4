"""Derivation: rates, restarts, windowed quantiles (hand-computed Prometheus values)."""

from __future__ import annotations

import math

import pytest

from llmtop.history import derive
from llmtop.model import EngineSample, Hist, ModelSample

INF = math.inf
B = (0.1, 0.5, 1.0, INF)


def H(cum, total=0.0, bounds=B):
    return Hist(bounds, tuple(float(c) for c in cum), total, float(cum[-1]) if cum else 0.0)


# ----------------------------------------------------------------------------- counters


def test_counter_rate_simple():
    assert derive.counter_rate([(0.0, 10.0), (1.0, 15.0), (2.0, 30.0)]) == pytest.approx(10.0)


def test_counter_rate_needs_two_points():
    assert derive.counter_rate([]) is None
    assert derive.counter_rate([(0.0, 10.0)]) is None
    assert derive.counter_rate([(1.0, 10.0), (1.0, 12.0)]) is None  # Δt == 0


def test_counter_decrease_clips_window_never_negative_or_spike():
    # restart between t=2 and t=3: 100 -> 5; then 5 -> 25 over 2 s
    pts = [(0.0, 80.0), (1.0, 90.0), (2.0, 100.0), (3.0, 5.0), (5.0, 25.0)]
    assert derive.counter_rate(pts) == pytest.approx(10.0)
    # right after the restart only one point remains: unknown, not 0, not negative
    assert derive.counter_rate(pts[:4]) is None


def test_counter_flat_is_zero_not_none():
    assert derive.counter_rate([(0.0, 7.0), (1.0, 7.0)]) == 0.0


def test_window_start_base_at_or_before_start():
    times = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert derive.window_start(times, 4.0, 2.0) == 2
    assert derive.window_start(times, 4.0, 2.5) == 1
    assert derive.window_start(times, 4.0, 100.0) == 0
    # no sample at or before the start: the oldest one
    assert derive.window_start([3.05, 4.0], 4.0, 1.0) == 0


# ----------------------------------------------------------------------------- quantiles


def test_bucket_quantile_matches_prometheus_interpolation():
    cum = (2, 6, 9, 10)
    # rank 5 in (0.1, 0.5]: 0.1 + 0.4 * (5-2)/4 = 0.4
    assert derive.bucket_quantile(0.5, B, cum) == (pytest.approx(0.4), None)
    # rank 9 in (0.5, 1]: 0.5 + 0.5 * (9-6)/3 = 1.0
    assert derive.bucket_quantile(0.9, B, cum) == (pytest.approx(1.0), None)
    # rank 9.5 is in +Inf: last finite bound, flagged above
    assert derive.bucket_quantile(0.95, B, cum) == (1.0, "above")


def test_bucket_quantile_lowest_bucket_is_an_upper_bound():
    cum = (8, 9, 10, 10)
    assert derive.bucket_quantile(0.5, B, cum) == (0.1, "below")
    assert derive.bucket_quantile(0.9, B, cum) == (pytest.approx(0.5), None)  # 0.1+0.4*1/1
    assert derive.bucket_quantile(0.95, B, cum)[0] == pytest.approx(0.75)  # 0.5+0.5*0.5
    assert derive.bucket_quantile(0.99, B, cum)[0] == pytest.approx(0.95)  # 0.5+0.5*0.9


def test_bucket_quantile_rank_on_boundary_takes_lower_bucket():
    # rank 4 == cum[1]: sort.Search picks bucket 1 and interpolates to its upper bound
    assert derive.bucket_quantile(0.5, B, (2, 4, 6, 8))[0] == pytest.approx(0.5)


def test_bucket_quantile_unusable():
    assert derive.bucket_quantile(0.5, B, (0, 0, 0, 0)) == (None, None)
    assert derive.bucket_quantile(0.5, (INF,), (3,)) == (None, None)
    assert derive.bucket_quantile(0.5, (0.1, 0.5), (1, 2)) == (None, None)  # no +Inf


def test_bucket_quantile_non_monotonic_is_fixed_like_prometheus():
    # ensureMonotonic: (2, 1, 9, 10) -> (2, 2, 9, 10); rank 5 in (0.5, 1]
    v, flag = derive.bucket_quantile(0.5, B, (2, 1, 9, 10))
    assert flag is None and v == pytest.approx(0.5 + 0.5 * 3 / 7)


def test_bucket_quantile_nan_and_out_of_range_q():
    # no bucket holds a NaN rank: it falls in the +Inf bucket, as the linear search gives
    assert derive.bucket_quantile(math.nan, B, (1, 2, 3, 4)) == (1.0, "above")
    assert derive.bucket_quantile(0.0, B, (0, 0, 0, INF)) == (1.0, "above")  # 0 * inf
    assert derive.bucket_quantile(1.5, B, (1, 2, 3, 4)) == (1.0, "above")
    assert derive.bucket_quantile(-1.0, B, (1, 2, 3, 4)) == (0.1, "below")
    # a NaN count takes the running max (ensureMonotonic): (1, 1, 3, 4), rank 2 in (0.5, 1]
    assert derive.bucket_quantile(0.5, B, (1, math.nan, 3, 4)) == (0.75, None)


def test_windowed_quantiles_from_bucket_deltas():
    # before: (1,1,1,1) sum 0.05; after: (3,7,10,11) sum 5.05  -> Δ (2,6,9,10), sum 5, count 10
    pts = [(0.0, H((1, 1, 1, 1), 0.05)), (10.0, H((3, 7, 10, 11), 5.05))]
    d = derive.hist_delta(pts)
    q = derive.hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)
    assert q.count == 10
    assert q.mean == pytest.approx(0.5)
    assert q.p50 == pytest.approx(0.4)
    assert q.p90 == pytest.approx(1.0)
    assert q.p95 == 1.0 and q.p99 == 1.0
    assert q.above == ("p95", "p99") and q.below == ()


def test_windowed_quantiles_all_in_lowest_bucket():
    pts = [(0.0, H((0, 0, 0, 0))), (1.0, H((5, 5, 5, 5), 0.25))]
    d = derive.hist_delta(pts)
    q = derive.hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)
    assert (q.p50, q.p90, q.p95, q.p99) == (0.1, 0.1, 0.1, 0.1)
    assert q.below == ("p50", "p90", "p95", "p99")
    assert q.mean == pytest.approx(0.05)


def test_empty_window_has_no_values():
    pts = [(0.0, H((5, 5, 5, 5), 1.0)), (1.0, H((5, 5, 5, 5), 1.0))]
    d = derive.hist_delta(pts)
    q = derive.hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)
    assert q.count == 0
    assert (q.p50, q.p95, q.mean) == (None, None, None)
    assert derive.hist_delta(pts[:1]) is None


def test_hist_layout_change_is_a_restart():
    other = (0.2, 1.0, INF)
    pts = [
        (0.0, H((1, 2, 3, 4))),
        (1.0, H((1, 2, 3), bounds=other)),
        (2.0, H((3, 4, 5), 1.0, bounds=other)),
    ]
    d = derive.hist_delta(pts)
    assert d.bounds == other and d.cumulative == (2, 2, 2) and d.count == 2
    assert derive.hist_delta(pts[:2]) is None


def test_hist_count_decrease_is_a_restart():
    pts = [(0.0, H((5, 6, 7, 8), 4.0)), (1.0, H((1, 1, 1, 1), 0.05)),
           (2.0, H((2, 2, 2, 2), 0.1))]
    d = derive.hist_delta(pts)
    assert d.count == 1 and d.sum == pytest.approx(0.05)


def test_mean_only_hist():
    a = Hist((), (), 1.0, 2.0)
    b = Hist((), (), 4.0, 5.0)
    d = derive.hist_delta([(0.0, a), (1.0, b)])
    q = derive.hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)
    assert q.mean == pytest.approx(1.0) and q.count == 3
    assert q.p50 is None and q.below == () and q.above == ()
    life = derive.lifetime_quantiles(b)
    assert life.mean == pytest.approx(0.8) and life.p95 is None


# ----------------------------------------------------------------------------- prefix hits


def test_prefix_hit_rate_from_counters():
    assert derive.prefix_hit_rate([(0.0, 10.0, 100.0), (1.0, 40.0, 200.0)]) == pytest.approx(0.3)
    assert derive.prefix_hit_rate([(0.0, 10.0, 100.0), (1.0, 10.0, 100.0)]) is None
    assert derive.prefix_hit_rate([], gauge=0.42) == 0.42


def test_prefix_hit_rate_restart():
    pts = [(0.0, 50.0, 100.0), (1.0, 1.0, 10.0), (2.0, 6.0, 20.0)]
    assert derive.prefix_hit_rate(pts) == pytest.approx(0.5)


# ----------------------------------------------------------------------------- restarts


def _es(start=None, **counters):
    return EngineSample("vllm", start_time=start, models=[ModelSample("m", counters=counters)])


def test_restart_reason():
    assert derive.restart_reason(_es(100.0, requests=5), _es(100.0, requests=6)) is None
    assert derive.restart_reason(_es(100.0, requests=5), _es(200.0, requests=6)) == (
        "process start time changed"
    )
    assert "requests" in derive.restart_reason(_es(None, requests=5), _es(None, requests=1))
    # unknown start time on one side: only counters decide
    assert derive.restart_reason(_es(None, requests=5), _es(300.0, requests=6)) is None


# ----------------------------------------------------------------------------- one model


def _ms(**kw):
    return ModelSample("m", **kw)


def test_derive_window_rates_finished_and_missing_stay_none():
    s0 = _ms(counters={"generation_tokens": 100.0, "requests": 4.0},
             counters_by={"finished": {"stop": 3.0, "length": 1.0}}, gauges={"running": 2.0})
    s1 = _ms(counters={"generation_tokens": 300.0, "requests": 8.0},
             counters_by={"finished": {"stop": 6.0, "length": 2.0}}, gauges={"running": 3.0})
    w = derive.derive_window([(0.0, s0), (2.0, s1)])
    assert w.rates["generation_tokens_per_s"] == pytest.approx(100.0)
    assert w.rates["requests_per_s"] == pytest.approx(2.0)
    assert w.rates["prompt_tokens_per_s"] is None  # not reported
    assert w.rates["preemptions_per_s"] is None
    assert w.rates["errors_per_s"] is None
    assert w.finished == {"stop": 3.0, "length": 1.0}
    assert w.prefix_hit_rate is None
    assert w.quantiles == {}


def test_derive_window_requests_fallback_and_errors_from_finished():
    s0 = _ms(counters_by={"finished": {"stop": 3.0, "error": 1.0}})
    s1 = _ms(counters_by={"finished": {"stop": 5.0, "error": 2.0}})
    w = derive.derive_window([(0.0, s0), (1.0, s1)])
    assert w.rates["requests_per_s"] == pytest.approx(3.0)
    assert w.rates["errors_per_s"] == pytest.approx(1.0)


def test_derive_window_prefix_gauge_fallback_only_without_counters():
    s = _ms(gauges={"prefix_hit_rate_gauge": 0.7})
    assert derive.derive_window([(0.0, s), (1.0, s)]).prefix_hit_rate == 0.7
    c0 = _ms(counters={"prefix_hits": 0.0, "prefix_queries": 0.0},
             gauges={"prefix_hit_rate_gauge": 0.7})
    assert derive.derive_window([(0.0, c0), (1.0, c0)]).prefix_hit_rate is None


def test_derive_lifetime():
    m = _ms(counters={"requests": 10.0, "prefix_hits": 25.0, "prefix_queries": 100.0},
            counters_by={"finished": {"stop": 9.0, "abort": 1.0}},
            hists={"ttft": H((2, 6, 9, 10), 5.0), "prompt_len": H((1, 1, 1, 1), 3.0)})
    life = derive.derive_lifetime(m, start_time=1000.0, t_wall=1060.0)
    assert life["ttft_s"].p50 == pytest.approx(0.4)
    assert life["prompt_len"].count == 1
    assert life["prefix_hit_rate"] == pytest.approx(0.25)
    assert life["requests"] == 10.0
    assert life["finished"] == {"stop": 9.0, "abort": 1.0}
    assert life["uptime_s"] == 60.0
    assert "generation_tokens" not in life  # not reported: absent, never 0


def test_lazily_created_series_count_from_zero():
    # SGLang/prometheus_client create labelled series on first use: absent, then present
    s0 = _ms(counters={"prompt_tokens": 100.0})
    s1 = _ms(counters={"prompt_tokens": 200.0, "generation_tokens": 50.0,
                       "prefix_hits": 5.0, "prefix_queries": 20.0},
             hists={"ttft": H((1, 2, 2, 2), 0.3)})
    w = derive.derive_window([(0.0, s0), (1.0, s1)])
    assert w.rates["generation_tokens_per_s"] == pytest.approx(50.0)
    assert w.prefix_hit_rate == pytest.approx(0.25)
    assert w.quantiles["ttft"].count == 2


def test_intermittently_missing_counter_is_not_zeroed():
    s0 = _ms(counters={"generation_tokens": 100.0})
    gap = _ms(counters={})
    s2 = _ms(counters={"generation_tokens": 300.0})
    w = derive.derive_window([(0.0, s0), (1.0, gap), (2.0, s2)])
    assert w.rates["generation_tokens_per_s"] == pytest.approx(100.0)
    w = derive.derive_window([(0.0, gap), (1.0, s0), (2.0, gap), (3.0, s2)])
    assert w.rates["generation_tokens_per_s"] == pytest.approx(100.0)  # no zero inserted


def test_derive_window_hist_keys_limits_the_quantiles_and_keeps_their_values():
    s0 = _ms(hists={"ttft": H((0, 0, 0, 0)), "prompt_len": H((0, 0, 0, 0))})
    s1 = _ms(hists={"ttft": H((2, 6, 10, 10), 4.0), "prompt_len": H((5, 5, 5, 5), 1.0)})
    full = derive.derive_window([(0.0, s0), (1.0, s1)])
    only = derive.derive_window([(0.0, s0), (1.0, s1)], {"ttft"})
    assert set(full.quantiles) == {"ttft", "prompt_len"}
    assert set(only.quantiles) == {"ttft"}
    assert only.quantiles["ttft"] == full.quantiles["ttft"]
    assert only.quantiles["ttft"].p50 == pytest.approx(0.4)  # rank 5 of 10: 0.1 + 3/4 * 0.4
