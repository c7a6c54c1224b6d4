"""``near_capacity``: load over the measured capacity, from the row's capacity fields."""

from __future__ import annotations

from llmtop.diagnose import diagnose
from tests.diagnose.rows import healthy

PROFILE = {"requests_per_s": 4.0, "output_tokens_per_s": 400.0, "slo": {"ttft": 0.5},
           "age_s": 7200.0, "stale": False}


def found(used: float, drift=(), **prof):
    row = healthy(requests_per_s=4.0 * used, capacity_used=used,
                  capacity={**PROFILE, **prof}, capacity_drift=list(drift))
    return [(f.rule, f.severity) for f in diagnose([row], window_s=30.0)
            if f.rule == "near_capacity"], diagnose([row], window_s=30.0)


def test_fires_at_95_percent_not_at_50():
    assert found(0.95)[0] == [("near_capacity", "warn")]
    assert found(0.5)[0] == []


def test_critical_at_the_capacity_with_evidence_and_action():
    got, findings = found(1.1)
    assert got == [("near_capacity", "critical")]
    f = next(f for f in findings if f.rule == "near_capacity")
    assert "4.40 req/s is 110 % of the 4.00 req/s" in f.summary and "2.0 h ago" in f.summary
    assert {e.signal for e in f.evidence} >= {"requests_per_s", "capacity_requests_per_s",
                                              "capacity_used", "slo", "profile_age_s", "drift"}
    assert "add a replica" in f.action


def test_drift_or_a_stale_profile_lowers_it_to_info():
    drift = [{"what": "prompt", "text": "prompts 2.1× longer than when measured"}]
    got, findings = found(0.95, drift)
    assert got == [("near_capacity", "info")]
    f = next(f for f in findings if f.rule == "near_capacity")
    assert "prompts 2.1× longer" in f.summary and "--lengths-from" in f.action
    assert found(0.95, stale=True)[0] == [("near_capacity", "info")]


def test_no_profile_no_finding():
    row = healthy(requests_per_s=100.0)
    assert not [f for f in diagnose([row], window_s=30.0) if f.rule == "near_capacity"]


def test_too_few_requests_in_the_window_is_not_judged():
    row = healthy(requests_per_s=0.1, capacity_used=1.0, capacity=dict(PROFILE))
    assert not [f for f in diagnose([row], window_s=30.0) if f.rule == "near_capacity"]
