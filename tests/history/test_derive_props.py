"""Property tests: derive agrees with a transcription of Prometheus' bucketQuantile, and
rates are never negative."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from llmtop.history import derive


def prom_bucket_quantile(q, bounds, cum):
    """promql/quantile.go bucketQuantile (classic buckets), transcribed."""
    if len(bounds) < 2 or not math.isinf(bounds[-1]):
        return math.nan
    cum = list(cum)
    for i in range(1, len(cum)):  # ensureMonotonic
        cum[i] = max(cum[i], cum[i - 1])
    observations = cum[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(cum) - 1) if cum[i] >= rank), len(cum) - 1)
    if b == len(cum) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], cum[b]
    if b > 0:
        start = bounds[b - 1]
        count -= cum[b - 1]
        rank -= cum[b - 1]
    return start + (end - start) * (rank / count)


bounds_st = st.lists(st.floats(0.001, 100.0), min_size=1, max_size=12, unique=True).map(
    lambda xs: (*sorted(xs), math.inf))


@st.composite
def hist_st(draw):
    bounds = draw(bounds_st)
    incs = draw(st.lists(st.integers(0, 50), min_size=len(bounds), max_size=len(bounds)))
    cum, total = [], 0
    for x in incs:
        total += x
        cum.append(float(total))
    return bounds, tuple(cum)


@given(hist_st(), st.sampled_from([0.5, 0.9, 0.95, 0.99]))
def test_matches_prometheus_except_lowest_bucket(h, q):
    bounds, cum = h
    v, flag = derive.bucket_quantile(q, bounds, cum)
    ref = prom_bucket_quantile(q, bounds, cum)
    if math.isnan(ref):
        assert v is None
    elif flag == "below":
        assert v == bounds[0]  # Prometheus would interpolate from 0: we report the bound
        assert ref <= bounds[0]
    else:
        assert v == ref or math.isclose(v, ref, rel_tol=1e-12)
        assert (flag == "above") == (v == bounds[-2] and cum[-2] < q * cum[-1])


@given(hist_st())
def test_quantiles_are_monotonic_in_q(h):
    bounds, cum = h
    vals = [derive.bucket_quantile(q, bounds, cum)[0] for q in (0.5, 0.9, 0.95, 0.99)]
    known = [v for v in vals if v is not None]
    assert known == sorted(known)


@given(st.lists(st.tuples(st.floats(0.01, 10.0), st.floats(0.0, 1e9)), min_size=0,
                max_size=20))
def test_rate_never_negative(steps):
    pts, t = [], 0.0
    for dt, v in steps:
        t += dt
        pts.append((t, v))
    r = derive.counter_rate(pts)
    assert r is None or r >= 0.0
    if len(pts) >= 2 and all(b[1] >= a[1] for a, b in itertools.pairwise(pts)):
        assert r is not None
