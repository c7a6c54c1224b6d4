from __future__ import annotations

from array import array

import pytest

from llmtop.loadgen.client import Result
from llmtop.loadgen.knee import find_knee, max_throughput, saturation, sla_boundary
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.runner import ladder, plateau_reached
from llmtop.loadgen.stats import percentiles, summarize_step


def _res(t_send, ttft, itl, n, usage=None, error=None):
    r = Result(t_send)
    if error:
        r.error = error
        return r
    r.t_first = t_send + ttft
    r.t_last = r.t_first + itl * (n - 1)
    r.t_end = r.t_last
    r.n_content = n
    r.output_tokens = usage if usage is not None else n
    r.gaps = array("d", [itl] * (n - 1))
    return r


def test_percentiles_interpolate_and_empty():
    q = percentiles([1, 2, 3, 4, 5])
    assert q["p50"] == 3 and q["mean"] == 3 and q["p90"] == pytest.approx(4.6)
    assert percentiles([]) == {"p50": None, "p90": None, "p95": None, "p99": None,
                               "mean": None}


def test_summarize_step_definitions():
    rs = [_res(0.0, 0.2, 0.02, 11), _res(1.0, 0.3, 0.02, 11, usage=12),
          _res(2.0, 0, 0, 0, error="http_503")]
    s = summarize_step(rs, duration_s=10.0, slo={"ttft": 0.25}, concurrency=2,
                       achieved_concurrency=2.0, client_cpu=0.1, loop_lag_ms=1.0)
    assert s["requests"] == 2 and s["errors"] == {"http_503": 1}
    assert s["output_tokens"] == 23
    assert s["ttft_s"]["mean"] == pytest.approx(0.25)
    assert s["itl_s"]["p50"] == pytest.approx(0.02)
    assert s["itl_request_s"]["p50"] == pytest.approx(0.02)
    # TPOT of the second request uses usage tokens: (E2E - TTFT) / (12 - 1)
    assert s["tpot_s"]["p50"] == pytest.approx((0.2 / 10 + 0.2 / 11) / 2)
    assert s["goodput_per_s"] == pytest.approx(0.1)  # only the first meets TTFT <= 0.25
    assert s["output_tokens_per_s"] == pytest.approx(2.3)
    assert s["client_bound"] is False


def test_client_bound_flags():
    s = summarize_step([_res(0, 0.1, 0.01, 5)], duration_s=1, concurrency=64,
                       achieved_concurrency=30.0, client_cpu=0.95, loop_lag_ms=50.0)
    assert s["client_bound"] is True
    assert len(s["client_bound_reasons"]) == 3


def _steps(xs, ys):
    return [{"index": i, "concurrency": x, "rate": None, "requests": 10,
             "output_tokens_per_s": y, "requests_per_s": y / 100, "error_rate": 0.0}
            for i, (x, y) in enumerate(zip(xs, ys, strict=True))]


LADDER = [1, 2, 4, 8, 16, 32, 64, 128]


def test_knee_found_at_the_ceiling():
    ys = [min(c, 32) * 100.0 for c in LADDER]
    sat = saturation(_steps(LADDER, ys))
    assert sat is not None and sat["concurrency"] == 32
    assert sat["fit"]["accepted"]


def test_knee_with_noise_and_soft_ceiling():
    ys = [100, 205, 390, 800, 1500, 2300, 2500, 2520]
    sat = saturation(_steps(LADDER, ys))
    assert sat is not None and sat["concurrency"] in (32, 64)


def test_knee_rejected_when_still_rising_or_too_few():
    assert saturation(_steps(LADDER, [c * 100.0 for c in LADDER])) is None
    fit = find_knee([1, 2, 4, 8], [1, 2, 3, 3])
    assert not fit["accepted"] and "at least" in fit["reason"]


def test_max_throughput_and_sla_boundary():
    steps = _steps(LADDER[:5], [100, 200, 400, 700, 720])
    for s, p95 in zip(steps, [0.1, 0.1, 0.2, 0.6, 2.0], strict=True):
        s.update({"ttft_s": {"p95": p95}, "itl_request_s": {"p95": 0.01},
                  "tpot_s": {"p95": 0.01}, "goodput_per_s": 1.0})
    assert max_throughput(steps)["concurrency"] == 16
    b = sla_boundary(steps, {"ttft": 0.5, "itl": None, "tpot": None})
    assert b["concurrency"] == 4 and b["met"]
    assert sla_boundary(steps, {"ttft": None, "itl": None, "tpot": None}) is None
    assert sla_boundary(steps, {"ttft": 0.01})["met"] is False


def test_plateau_rule_and_ladder():
    assert not plateau_reached([100, 200, 400])
    assert plateau_reached([100, 200, 400, 410, 415])
    assert not plateau_reached([100, 200, 400, 410, 430])
    assert [c for c, _ in ladder(ProbeOptions(url="x", sweep=True, max_concurrency=20))] == \
        [1, 2, 4, 8, 16, 20]
    assert [r for _, r in ladder(ProbeOptions(url="x", sweep=True, rate=2))][:3] == [2, 4, 8]
    assert ladder(ProbeOptions(url="x", concurrency=5)) == [(5, None)]
