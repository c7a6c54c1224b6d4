"""``imbalance`` names the overloaded replica only with evidence, and never a healthy one.

The shapes are the ones seen on ``llmtop demo fleet`` (``--once --json`` on a real
Prometheus): a healthy vLLM (19-30 running, 0 waiting, KV ~38 %, ITL p95 25 ms) beside a
replica of the same model in the ``kv-pressure`` scenario (8-9 running, 14-18 waiting, KV
94-97 %, ~1 preemption/s); and the demo's ``imbalance`` scenario (vLLM 40-49 running, KV
50-62 %, ITL p95 ~42 ms; its SGLang replica 3-5 running, KV 7-10 %, ITL p95 ~15 ms).
"""

from __future__ import annotations

from llmtop.diagnose import diagnose

from .rows import healthy, q

HEALTHY = "127.0.0.1:39829"
TROUBLE = "127.0.0.1:45495"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _row(target: str, **kw):
    return healthy(target, model=MODEL, **kw)


def _healthy(running: float = 19.0, kv: float = 0.38, **kw):
    return _row(HEALTHY, running=running, waiting=0.0, kv_cache_usage=kv,
                itl_s=q(0.02, 0.025, 20000), **kw)


def _kv_starved(running: float = 8.0, waiting: float = 18.0, **kw):
    return _row(TROUBLE, running=running, waiting=waiting, kv_cache_usage=0.97,
                preemptions_per_s=1.0, itl_s=q(0.02, 0.024, 6000), **kw)


def _on(found, target):
    return [(f.rule, f.severity) for f in found if f.target == target]


def test_a_healthy_replica_beside_a_kv_starved_sibling_gets_no_warning():
    # 19 running vs 8 (and 30 vs 9 in a burst) fired "overloaded" on the healthy one before
    for running, other in ((19.0, 8.0), (21.0, 9.0), (30.0, 9.0)):
        found = diagnose([_healthy(running), _kv_starved(other)])
        assert _on(found, HEALTHY) == [], [f.summary for f in found]


def test_the_kv_starved_replica_is_named_and_its_idle_sibling_too():
    rows = [_healthy(30.0), _kv_starved(9.0)]
    found = diagnose(rows, waiting_min={r.key: r.waiting for r in rows})  # queued all window
    imb = [f for f in found if f.rule == "imbalance"]
    assert [f.target for f in imb] == [TROUBLE]
    s = imb[0].summary
    assert f"replica {TROUBLE} of {MODEL} overloaded: 18 waiting, KV 97 %" in s
    assert f"while its sibling {HEALTHY} is idle (0 waiting, 30 running, KV 38 %)" in s
    ev = {e.signal: e.value for e in imb[0].evidence}
    assert ev["waiting"] == 18.0 and ev["siblings_max.waiting"] == 0.0
    assert ev["idle_siblings_max.kv"] == 0.38


def test_a_short_queue_with_a_kv_gap_names_the_full_replica():
    # below the 8-waiting floor, the KV gap with a queue and preemption is the evidence
    found = diagnose([_healthy(), _kv_starved(waiting=3.0)])
    imb = [f for f in found if f.rule == "imbalance"]
    assert [f.target for f in imb] == [TROUBLE]
    assert "KV 97 % (3 waiting, 1 preemptions/s)" in imb[0].summary
    assert f"sibling {HEALTHY} is idle" in imb[0].summary


def test_the_demo_fleet_shape_names_only_the_replica_in_trouble():
    # llmtop demo fleet (8 engines): model A has 4 healthy replicas and the one in trouble
    rows = [_row(f"127.0.0.1:{30000 + k}", running=r, waiting=0.0, kv_cache_usage=kv,
                 itl_s=q(0.02, 0.025, 20000))
            for k, (r, kv) in enumerate(((21, 0.37), (17, 0.38), (12, 0.23), (23, 0.46)))]
    found = diagnose([*rows, _kv_starved(10.0, 9.0)])
    assert {f.target for f in found if f.severity != "info"} == {TROUBLE}
    imb = [f for f in found if f.rule == "imbalance"]
    assert len(imb) == 1 and "while 4 of its 4 siblings are idle (least loaded: " \
        "127.0.0.1:30002, 0 waiting, 12 running, KV 23 %)" in imb[0].summary


def test_a_healthy_pair_with_a_running_spread_but_no_cost_is_not_imbalanced():
    # 21 vs 9 running, nothing waiting, KV 40 % vs 20 %, same ITL: both have room
    a = _row(HEALTHY, running=21.0, waiting=0.0, kv_cache_usage=0.4,
             itl_s=q(0.02, 0.025, 20000))
    b = _row(TROUBLE, running=9.0, waiting=0.0, kv_cache_usage=0.2,
             itl_s=q(0.02, 0.024, 9000))
    assert diagnose([a, b]) == []
    # an SGLang sibling decodes faster by design (18 ms vs 25 ms): still no cost
    b2 = _row(TROUBLE, running=9.0, waiting=0.0, kv_cache_usage=0.2,
              itl_s=q(0.015, 0.018, 9000))
    assert diagnose([a, b2]) == []


def test_a_kv_gap_without_a_queue_or_preemption_is_not_imbalanced():
    a = _row(HEALTHY, running=8.0, waiting=0.0, kv_cache_usage=0.9)
    b = _row(TROUBLE, running=6.0, waiting=0.0, kv_cache_usage=0.3)
    assert diagnose([a, b]) == []


def test_the_demo_imbalance_scenario_names_the_busy_replica_by_its_latency_cost():
    busy = _row(HEALTHY, running=49.0, waiting=0.0, kv_cache_usage=0.62,
                itl_s=q(0.03, 0.042, 20000))
    idle = _row(TROUBLE, running=4.0, waiting=0.0, kv_cache_usage=0.07,
                itl_s=q(0.012, 0.015, 1500))
    found = diagnose([busy, idle])
    assert [(f.rule, f.target, f.severity) for f in found] == [("imbalance", HEALTHY, "warn")]
    s = found[0].summary
    assert "49 running (ITL p95 42 ms vs 15 ms)" in s and f"sibling {TROUBLE} is idle" in s
    ev = {e.signal: e.value for e in found[0].evidence}
    assert ev["idle_siblings_median.running"] == 4.0 and ev["itl_p95"] == 0.042


def test_no_replica_is_overloaded_when_every_sibling_is_busy_too():
    # the model is short of capacity (every replica queues or is full): not a routing spread
    a = _row(HEALTHY, running=30.0, waiting=12.0, kv_cache_usage=0.7)
    b = _row(TROUBLE, running=10.0, waiting=0.0, kv_cache_usage=0.96)
    c = _row("127.0.0.1:1", running=12.0, waiting=2.0, kv_cache_usage=0.5)
    assert [f for f in diagnose([a, b, c]) if f.rule == "imbalance"] == []


def test_a_sibling_whose_waiting_is_unknown_is_not_idle():
    # missing is not zero: a sibling that reports no queue gauge shows no room
    a = _row(HEALTHY, running=8.0, waiting=12.0)
    b = _row(TROUBLE, running=2.0, waiting=None)
    assert [f for f in diagnose([a, b]) if f.rule == "imbalance"] == []
