"""SGLang's queue and its full token pool, as a real SGLang 0.5.23 showed them on a 2-core
CPU (tiny model; tests/real_engine/test_real_sglang_incidents.py). Queue: with
``--max-running-requests 2`` and 12 clients x 200 tokens, 2 requests got a slot in a 5 s
window, far under MIN_REQUESTS, and SGLang exports no service-time histogram, so the gauges
are the evidence: running pinned at its exported limit and the queue long all window
(``QUEUE_PINNED_MIN``)."""

from __future__ import annotations

from dataclasses import replace

from llmtop.diagnose import diagnose
from llmtop.model import EngineRow, Quantiles
from tests.diagnose.rows import healthy

T = "sglang@127.0.0.1:30000"
KEY = f"{T}|llama"


def _qm(mean: float, p95: float, n: float) -> Quantiles:
    return Quantiles(p50=mean, p90=p95, p95=p95, p99=p95, mean=mean, count=n)


def pinned(**kw) -> EngineRow:
    """The real shape: running 2 of 2, 10 waiting, 2 admitted in 5 s after ~20 s queued."""
    r = healthy(target=T, engine="sglang", running=2.0, waiting=10.0, max_running=2.0,
                kv_cache_usage=0.05, queue_s=_qm(20.0, 24.0, 2), ttft_s=_qm(20.1, 24.0, 2),
                inference_s=None, decode_s=None, prefill_s=_qm(0.02, 0.05, 2),
                e2e_s=_qm(24.0, 26.0, 2), requests_per_s=0.4, prefix_hit_rate=None)
    return replace(r, **kw)


def _found(row: EngineRow, wmin: float | None = 10.0) -> list:
    return diagnose([row], window_s=5.0, waiting_min={KEY: wmin} if wmin is not None
                    else None)


def test_a_pinned_queue_is_named_from_two_admitted_requests():
    f = _found(pinned())
    assert [x.rule for x in f] == ["queueing"] and f[0].severity == "critical"
    s = f[0].summary
    assert "10 requests wait" in s and "running is pinned at 2 = its limit" in s
    assert "only 2 got a slot in 5 s, but at least 10 waited all window" in s
    ev = {e.signal: e.value for e in f[0].evidence}
    assert ev["requests"] == 2 and ev["running"] == 2.0 and ev["waiting_min"] == 10.0
    # the running limit is what admits: its flag, not the scheduler's conservativeness
    assert "--max-running-requests" in f[0].action
    assert "conservativeness" not in f[0].action


def test_a_pinned_queue_needs_every_part_of_the_gauge_evidence():
    def fires(row: EngineRow, wmin: float | None = 10.0) -> bool:
        return any(x.rule == "queueing" for x in _found(row, wmin))

    assert not fires(pinned(), 3.0)  # the queue drained below 5 in the window
    assert not fires(pinned(), None)  # the window's smallest queue is unknown
    assert not fires(pinned(waiting=4.0), 4.0)  # a thin queue
    assert not fires(pinned(running=0.0))  # far under its limit: something else admits
    assert not fires(pinned(max_running=None))  # no exported limit to be pinned at
    # none admitted: only the long queue itself is named (warn), without the pinned words
    (none,) = _found(pinned(queue_s=_qm(0.0, 0.0, 0), ttft_s=None))
    assert none.severity == "warn" and "got a slot" not in none.summary
    assert not fires(pinned(queue_s=_qm(0.2, 0.3, 2)))  # a short wait is no queue
    assert not fires(pinned(ttft_s=_qm(60.0, 70.0, 2)))  # queue a small share of TTFT


def test_the_running_gauge_one_short_right_after_an_admission_is_at_the_limit():
    """SGLang's gauge is set at a prefill batch before the admitted request joins: with a
    queue all window, running 1 of 2 is the limit (its words say so), and so is the action;
    without a queue all window it is not."""
    (f,) = _found(pinned(running=1.0))
    assert "running is at its limit of 2 (1 by the gauge" in f.summary
    assert "--max-running-requests" in f.action
    assert not _found(pinned(running=1.0), 3.0)


def test_a_healthy_or_small_queue_sglang_says_nothing():
    calm = pinned(running=1.0, waiting=0.0, queue_s=_qm(0.002, 0.005, 3),
                  ttft_s=_qm(0.03, 0.05, 3))
    assert _found(calm, 0.0) == []
    small = pinned(waiting=2.0, queue_s=_qm(3.0, 4.0, 2))
    assert _found(small, 2.0) == []


def test_sglang_below_its_limit_is_told_about_conservativeness():
    """Token usage low and running under its limit: the scheduler admits too few."""
    many = pinned(running=5.0, max_running=16.0, queue_s=_qm(3.0, 4.0, 30),
                  ttft_s=_qm(3.2, 4.2, 30))
    f = _found(many)
    assert [x.rule for x in f] == ["queueing"]
    assert "--schedule-conservativeness" in f[0].action
    assert "--max-running-requests" not in f[0].action


def test_a_full_sglang_pool_with_a_queue_is_kv_pressure_first():
    """The real shape (``--max-total-tokens 980``, 14 clients x ~240 + 4 tokens): token
    usage 0.98, 6 waiting, no retraction, and the running gauge at 0 (set at prefill
    batches, before the batch it admits joins; 4-token requests rarely reach the 40th decode
    step that refreshes it). The queue it causes follows; the action is the pool's size,
    not the conservativeness."""
    full = pinned(running=0.0, max_running=16.0, waiting=6.0, kv_cache_usage=0.98,
                  preemptions_per_s=0.0, queue_s=_qm(2.56, 4.5, 20), ttft_s=_qm(3.39, 5.75, 20))
    f = _found(full, 6.0)
    assert [x.rule for x in f][:1] == ["kv_pressure"]
    assert f[0].summary == "KV cache 98 % full: 6 waiting"
    assert "--max-total-tokens" in f[0].action and "conservativeness" not in f[0].action
    # the same pool with room (a thin moment between admissions) is no KV finding
    assert "kv_pressure" not in [x.rule for x in _found(replace(full, kv_cache_usage=0.8), 6.0)]
