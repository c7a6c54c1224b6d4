"""The serving-stack findings: each on two cases built differently, and a healthy case.

Cases: stores fed with real vLLM CPU captures and router fixtures (tests/stack/build.py), and
rows built in code (tests/diagnose/rows.py magnitudes). The demo's scenarios are helper
h42demo's (its simulated router); they are run against these rules there.
"""

from __future__ import annotations

import pytest

from llmtop.diagnose import diagnose
from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.rules.stuck import stuck
from llmtop.model import RawScrape
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.link import link_stack
from tests.conftest import fixture_text
from tests.diagnose.rows import healthy, q

from .build import engine_pair, feed, round_robin_store, scaled, store_with, target


def run(snap, window_s, waiting_min=None):
    return diagnose(snap.engines, routers=snap.routers, window_s=window_s,
                    waiting_min=waiting_min or {})


def rules(found, rule):
    return [f for f in found if f.rule == rule]


def wmin(store, snap):
    """The smallest waiting of each row over the store's scrapes (as --once computes it)."""
    return {r.key: r.waiting for r in snap.engines if r.waiting is not None}


# ------------------------------------------------------------------ routing: overfed


def test_routing_round_robin_over_a_queueing_replica_real_captures():
    s = round_robin_store("queueing", "calm")
    snap = s.snapshot(10.0)
    found = run(snap, 5.0, {"b|tiny-llama": 6.0, "a|tiny-llama": 0.0})
    [f] = rules(found, "routing")
    assert f.target == "b" and f.severity == "warn"
    assert "policy round_robin" in f.summary and "50 %" in f.summary
    assert "a has room" in f.summary
    assert not rules(found, "imbalance")  # one cause, one finding


def _seats_case(limits, shares=(0.5, 0.5), waiting=(12.0, 0.0)):
    pairs = zip(limits, waiting, strict=True)
    rows = [healthy(f"e{i}", max_running=lim, running=min(lim, 4.0), waiting=w,
                    kv_cache_usage=0.3) for i, (lim, w) in enumerate(pairs)]
    r = RouterRow(target="smg", engine="sglang-router", policy="round_robin",
                  requests_per_s=4.0,
                  backends=[BackendRow(f"http://h:{i}", requests_per_s=4.0 * sh, routed_share=sh)
                            for i, sh in enumerate(shares)])
    link_stack(rows, [r], {f"e{i}": f"http://h:{i}" for i in range(len(rows))})
    return rows, r


def test_routing_names_capacity_shares_rows_built_in_code():
    rows, r = _seats_case((1.0, 8.0))
    found = diagnose(rows, routers=[r], window_s=30.0,
                     waiting_min={rows[0].key: 12.0, rows[1].key: 0.0})
    [f] = rules(found, "routing")
    assert f.target == "e0"
    assert "11 % of the pool's running limits" in f.summary  # 1 of 9 seats
    ev = {e.signal: e.value for e in f.evidence}
    assert ev["routed_share"] == 0.5 and ev["capacity_share"] == pytest.approx(1 / 9)


def test_routing_fires_above_the_capacity_share_when_below_an_equal_share():
    """Three replicas, one with 1 seat of 17: it gets 25 % (under the equal-share line,
    0.8 x 1/3) yet over 1.5 x its 6 % of the capacity; with equal seats, no finding."""
    shares, waiting = (0.25, 0.375, 0.375), (12.0, 0.0, 0.0)
    rows, r = _seats_case((1.0, 8.0, 8.0), shares=shares, waiting=waiting)
    found = diagnose(rows, routers=[r], window_s=30.0,
                     waiting_min={row.key: w for row, w in zip(rows, waiting, strict=True)})
    [f] = rules(found, "routing")
    assert f.target == "e0" and "sends e0 25 % of the requests" in f.summary
    assert "(it has 6 % of the pool's running limits)" in f.summary
    ev = {e.signal: e for e in f.evidence}
    assert ev["routed_share"].value == 0.25 < ev["routed_share"].threshold == 0.267
    assert ev["capacity_share"].value == pytest.approx(1 / 17)
    rows, r = _seats_case((8.0, 8.0, 8.0), shares=shares, waiting=waiting)
    assert not rules(diagnose(rows, routers=[r], window_s=30.0,
                              waiting_min={row.key: w for row, w in
                                           zip(rows, waiting, strict=True)}), "routing")


def test_routing_quiet_on_a_calm_stack_and_when_all_are_busy():
    s = round_robin_store("calm", "calm")
    assert not rules(run(s.snapshot(10.0), 5.0), "routing")
    rows, r = _seats_case((8.0, 8.0), waiting=(12.0, 12.0))  # the pool is short: not routing
    assert not rules(diagnose(rows, routers=[r], window_s=30.0), "routing")
    rows, r = _seats_case((1.0, 8.0), shares=(0.1, 0.9))  # the router already steers away
    assert not rules(diagnose(rows, routers=[r], window_s=30.0), "routing")


# ------------------------------------------------------------------ routing: backend down


def test_routing_backend_down_in_the_routers_eyes_pd_fixture():
    router = fixture_text("routers/vllm-router-pd-SYNTHETIC-metrics-rs.txt")
    s = store_with(target("r", 29000), target("p", 8101), target("d", 8102))
    calm = engine_pair("calm")
    for t, k in ((0.0, 1.0), (5.0, 2.0)):
        feed(s, "r", t, scaled(router, k))
        for name in ("p", "d"):
            feed(s, name, t, calm[int(k) - 1])
    found = run(s.snapshot(10.0), 5.0)  # 8103 is not scraped: only the router knows it
    [f] = rules(found, "routing")
    assert f.target == "http://127.0.0.1:8103" and f.severity == "critical"  # 4 req/s
    assert "in the router's eyes (unhealthy, breaker open)" in f.summary
    assert "still sends it" in f.summary
    assert "1 of 2 replicas left" in f.summary
    assert not [x for x in found if x.target in ("p", "d")]  # the survivors are not flagged


def test_routing_engine_down_real_scrapes_agree_with_the_router():
    s = round_robin_store("calm", "calm")
    s.ingest(RawScrape(target="b", url="u", t_wall=1.7e9 + 6, t_mono=6.0, status="down",
                       error="connection refused"))
    router = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt")
    feed(s, "router", 6.0, scaled(router, 2.0, gauges={
        'vllm_router_worker_health{worker="http://127.0.0.1:8002"}': 0.0}))
    s.commit(6.0, 1.7e9 + 6)
    found = run(s.snapshot(10.0), 6.0)
    [f] = rules(found, "routing")
    assert f.target == "b" and "unhealthy, not answering llmtop (down)" in f.summary
    assert not [x for x in found if x.target == "a"]


def test_routing_engine_down_while_router_counts_it_healthy_rows():
    rows, r = _seats_case((8.0, 8.0), waiting=(0.0, 0.0))
    rows[1].state = "down"
    r.backends[0].healthy = r.backends[1].healthy = True
    [f] = rules(diagnose(rows, routers=[r], window_s=30.0), "routing")
    assert f.target == "e1" and "yet the router counts it healthy" in f.summary
    r.backends[1].requests_per_s = 0.0
    [f] = rules(diagnose(rows, routers=[r], window_s=30.0), "routing")
    assert f.severity == "warn" and "no longer sends it" in f.summary


def test_routing_healthy_backends_no_finding():
    rows, r = _seats_case((8.0, 8.0), waiting=(0.0, 0.0))
    for b in r.backends:
        b.healthy, b.breaker_open = True, False
    assert not rules(diagnose(rows, routers=[r], window_s=30.0), "routing")


# ------------------------------------------------------------------ routing: overhead


def _overhead(router_mean):
    a = healthy("a", e2e_s=q(2.0, 3.0, 40))
    r = RouterRow(target="r", request_s=q(router_mean, router_mean * 1.5, 40),
                  backends=[BackendRow("http://h:1", requests_per_s=1.0)])
    link_stack([a], [r], {"a": "http://h:1"})
    return diagnose([a], routers=[r], window_s=30.0)


def test_routing_router_overhead():
    [f] = rules(_overhead(3.0), "routing")
    assert f.target == "r" and "adds 1.0 s" in f.summary
    assert not rules(_overhead(2.01), "routing")


# ------------------------------------------------------------------ pd_balance


def _pd(prefill_waiting, decode_kv, decode_waiting=0.0, labels=False):
    p = healthy("p", running=4.0, waiting=prefill_waiting, max_running=4.0,
                queue_s=q(1.0, 2.0, 40), prefill_s=q(0.4, 0.8, 40))
    ds = [healthy(f"d{i}", running=4.0, waiting=decode_waiting, max_running=16.0,
                  kv_cache_usage=decode_kv) for i in (1, 2)]
    rows = [p, *ds]
    if labels:  # fleet: roles from pod labels, no router
        p.labels = {"llm-d.ai/role": "prefill"}
        for d in ds:
            d.labels = {"llm-d.ai/role": "decode"}
        link_stack(rows, [], {})
        return rows, []
    r = RouterRow(target="r", backends=[BackendRow("http://h:0", role="prefill"),
                                         BackendRow("http://h:1", role="decode"),
                                         BackendRow("http://h:2", role="decode")])
    link_stack(rows, [r], {"p": "http://h:0", "d1": "http://h:1", "d2": "http://h:2"})
    return rows, [r]


def test_pd_balance_prefill_saturated_behind_a_router():
    rows, routers = _pd(prefill_waiting=9.0, decode_kv=0.2)
    [f] = rules(diagnose(rows, routers=routers, window_s=30.0), "pd_balance")
    assert f.target == "r" and "prefill pool is saturated" in f.summary
    ev = {e.signal: e.value for e in f.evidence}
    # prefill needs 1 x (4 + 9) / 4 = 3.25, decode 2 x 8 / 32 ... = 2 x 0.25 = 0.5
    assert ev["prefill_to_decode_needed"] == pytest.approx(3.25 / 0.5)
    assert ev["prefill_to_decode_now"] == "1:2"


def test_pd_balance_decode_full_roles_from_pod_labels():
    rows, routers = _pd(prefill_waiting=0.0, decode_kv=0.97, decode_waiting=3.0, labels=True)
    rows[0].kv_cache_usage = 0.1
    [f] = rules(diagnose(rows, routers=routers, window_s=30.0), "pd_balance")
    assert f.target == "p" and "decode pool is saturated" in f.summary


def test_pd_balance_quiet_when_balanced():
    rows, routers = _pd(prefill_waiting=0.0, decode_kv=0.3)
    assert not rules(diagnose(rows, routers=routers, window_s=30.0), "pd_balance")
    rows, routers = _pd(prefill_waiting=9.0, decode_kv=0.9, decode_waiting=5.0)  # both full
    assert not rules(diagnose(rows, routers=routers, window_s=30.0), "pd_balance")


# ------------------------------------------------------------------ kv_transfer


def _nixl_store(k2):
    s = store_with(target("d", 8000))
    text = fixture_text("stack/vllm-nixl-lmcache-SYNTHETIC.txt")
    feed(s, "d", 0.0, scaled(text, 1.0))
    feed(s, "d", 10.0, scaled(text, k2, gauges={}))
    return s


def test_kv_transfer_failures_nixl_fixture():
    snap = _nixl_store(1.5).snapshot(30.0)  # 2 more failures in 10 s
    [f] = rules(run(snap, 10.0), "kv_transfer")
    assert f.target == "d" and f.severity == "critical" and "2 failed transfers" in f.summary


def test_kv_transfer_slow_path_behind_a_pd_router_rows():
    d = healthy("d", ttft_s=q(0.5, 0.8, 40), queue_s=q(0.02, 0.05, 40))
    p = healthy("p", queue_s=q(0.05, 0.1, 40), prefill_s=q(0.1, 0.2, 40))
    r = RouterRow(target="r", decode_pending_s=q(0.35, 0.6, 40),
                  backends=[BackendRow("http://h:0", role="prefill"),
                            BackendRow("http://h:1", role="decode")])
    link_stack([p, d], [r], {"p": "http://h:0", "d": "http://h:1"})
    [f] = rules(diagnose([p, d], routers=[r], window_s=30.0), "kv_transfer")
    assert f.target == "r" and "router decode-pending" in f.summary
    r.decode_pending_s = q(0.01, 0.02, 40)
    assert not rules(diagnose([p, d], routers=[r], window_s=30.0), "kv_transfer")


def test_kv_transfer_quiet_without_failures():
    text = fixture_text("stack/vllm-nixl-lmcache-SYNTHETIC.txt")
    s = store_with(target("d", 8000))
    feed(s, "d", 0.0, text)
    feed(s, "d", 10.0, text)  # nothing failed in the window (the lifetime 4 are old)
    assert not rules(run(s.snapshot(30.0), 10.0), "kv_transfer")


# ------------------------------------------------------------------ stuck


def test_stuck_real_capture_frozen_for_20_s():
    a, _b = engine_pair("queueing")  # 2 running, 10 waiting, and then nothing moves
    s = store_with(target("e", 8000))
    for t in (0.0, 5.0, 10.0, 15.0, 20.0):
        feed(s, "e", t, a)
    snap = s.snapshot(30.0)
    [f] = rules(run(snap, 30.0), "stuck")
    assert f.severity == "critical" and "no token generated for 20 s" in f.summary
    assert "2 running, 10 waiting" in f.summary


def test_stuck_row_built_in_code_with_deferred():
    r = healthy(running=4.0, waiting=12.0, waiting_deferred=4.0, kv_cache_usage=0.2,
                tokens_idle_s=40.0, generation_tokens_per_s=0.0)
    [f] = stuck(RowCtx(row=r, base=None, window_s=30.0))
    assert "4 of them deferred" in f.summary and "KV 20 %" in f.summary


def test_stuck_quiet_when_tokens_move_or_nothing_is_held():
    a, b = engine_pair("queueing")
    s = store_with(target("e", 8000))
    for t, body in ((0.0, a), (10.0, a), (20.0, b)):  # tokens moved in the last interval
        feed(s, "e", t, body)
    assert not rules(run(s.snapshot(30.0), 30.0), "stuck")
    assert not stuck(RowCtx(row=healthy(running=0.0, waiting=0.0, tokens_idle_s=60.0),
                            base=None, window_s=30.0))
    assert not stuck(RowCtx(row=healthy(tokens_idle_s=10.0), base=None, window_s=30.0))


def test_live_diagnoser_keeps_and_ends_a_router_finding():
    """A finding named on a router (no engine row of its own) starts, holds and ends through
    the live ``Diagnoser`` like an engine's (hysteresis, no KeyError)."""
    from llmtop.diagnose.state import Diagnoser

    d = Diagnoser()
    kinds = []
    for t, mean in ((0.0, 3.0), (10.0, 3.0), (20.0, 2.01), (40.0, 2.01), (60.0, 2.01)):
        a = healthy("a", e2e_s=q(2.0, 3.0, 40))
        r = RouterRow(target="r", request_s=q(mean, mean * 1.5, 40),
                      backends=[BackendRow("http://h:1", requests_per_s=1.0)])
        link_stack([a], [r], {"a": "http://h:1"})
        kinds += [(tr.kind, tr.finding.target) for tr in d.update(t, [a], [], force=True,
                                                                  routers=[r])]
    assert ("start", "r") in kinds and ("end", "r") in kinds
