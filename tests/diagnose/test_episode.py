"""An ongoing anomaly does not become the baseline: the signals of a warn/critical finding
are held out of the baseline while it lasts (their usual values frozen at its start)."""

from __future__ import annotations

from llmtop.diagnose import Diagnoser
from llmtop.diagnose.state import kin
from tests.diagnose.rows import healthy, q

TICK_S = 5.0


def long_prompt_row():
    """The prompt mix changed and prefill/TTFT rose with it (long_prompts, warn)."""
    return healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=q(0.9, 1.8, 60),
                   ttft_s=q(1.0, 2.0, 60))


def simulate(d: Diagnoser, healthy_s: float, anomaly_s: float, after_s: float = 0.0
             ) -> list[tuple[float, list[tuple[str, str]]]]:
    """Feed healthy rows, then the anomaly, then healthy again, every TICK_S; returns
    (t, [(rule, severity)]) after each run of the rules."""
    out = []
    t = 0.0
    while t < healthy_s + anomaly_s + after_s:
        row = long_prompt_row() if healthy_s <= t < healthy_s + anomaly_s else healthy()
        d.observe(t, [row], [])
        d.update(t, [row], [])
        out.append((t, [(f.rule, f.severity) for f in d.findings]))
        t += TICK_S
    return out


def during(log, start: float, end: float):
    return [(t, fs) for t, fs in log if start <= t < end]


def test_five_minute_anomaly_after_ten_healthy_minutes_stays_warn():
    log = simulate(Diagnoser(), 600.0, 300.0)
    assert all(fs == [] for _, fs in during(log, 0.0, 600.0))
    for t, fs in during(log, 600.0, 900.0):
        assert fs == [("long_prompts", "warn")], (t, fs)


def test_anomaly_longer_than_the_healthy_history_stays_warn():
    """llmtop started 2 minutes before the trouble (as in the demo): without holding the
    episode out, its points outnumber the healthy ones in the median after ~2 minutes."""
    log = simulate(Diagnoser(), 120.0, 300.0)
    for t, fs in during(log, 120.0, 420.0):
        assert fs == [("long_prompts", "warn")], (t, fs)


def test_anomaly_longer_than_the_baseline_window_stays_warn():
    log = simulate(Diagnoser(), 600.0, 1200.0)
    for t, fs in during(log, 600.0, 1800.0):
        assert fs == [("long_prompts", "warn")], (t, fs)


def test_after_the_episode_the_baseline_is_the_healthy_one():
    d = Diagnoser()
    log = simulate(d, 120.0, 300.0, after_s=120.0)
    assert all(fs == [] for _, fs in during(log, 450.0, 540.0))  # ended (15 s hold)
    b = d.tracker.baseline(healthy().key, 535.0, 30.0)
    assert b is not None and b.get("prompt_p50") == 380.0 and b.get("prefill_p95") == 0.25
    assert d.held(535.0) == {}


def test_an_episode_longer_than_the_freeze_limit_becomes_the_usual():
    d = Diagnoser(freeze_max_s=300.0)
    log = simulate(d, 120.0, 1500.0)
    assert during(log, 130.0, 400.0)[-1][1] == [("long_prompts", "warn")]
    assert during(log, 1500.0, 1620.0)[-1][1] == []  # learnt: 15 min of it since the limit


def test_kin_of_an_evidence_signal():
    assert kin("prefill_mean") == {"prefill_p50", "prefill_p95", "prefill_mean"}
    assert kin("running") == {"running"} and kin("preemptions_per_s") == frozenset()
