"""Routers in the store: router rows over a window, backends linked to engine rows."""

from __future__ import annotations

import json

import pytest

from llmtop.model import Snapshot
from tests.conftest import fixture_text

from .build import feed, round_robin_store, scaled, store_with, target


def snap() -> Snapshot:
    return round_robin_store().snapshot(10.0)


def test_router_is_a_router_not_an_engine():
    s = snap()
    assert [r.target for r in s.engines] == ["a", "b"]
    [r] = s.routers
    assert r.engine == "vllm-router" and r.policy == "round_robin" and r.state == "ok"
    assert r.requests_per_s == pytest.approx(120 / 5)  # Δprocessed 120 over 5 s
    assert r.retries_per_s == pytest.approx(2 / 5)
    assert (r.healthy_backends, r.total_backends, r.open_breakers) == (2, 2, 0)
    assert r.request_s is not None and r.request_s.count == 120


def test_backends_linked_by_host_port_with_shares():
    s = snap()
    [r] = s.routers
    by_url = {b.url: b for b in r.backends}
    assert by_url["http://127.0.0.1:8001"].target == "a"
    assert by_url["http://127.0.0.1:8002"].target == "b"
    assert [b.routed_share for b in r.backends] == [pytest.approx(0.5)] * 2
    rows = {e.target: e for e in s.engines}
    assert rows["a"].router == "router" and rows["b"].router == "router"
    assert rows["a"].role is None  # round robin: nothing names a role


def test_json_carries_routers_and_row_links():
    doc = snap().to_json("x")
    assert list(doc)[:5] == ["llmtop", "time", "window_s", "engines", "routers"]
    [r] = doc["routers"]
    for key in ("target", "engine", "state", "policy", "requests_per_s", "healthy_backends",
                "total_backends", "open_breakers", "retries_per_s", "latency", "backends"):
        assert key in r
    assert set(r["latency"]) >= {"request_p95_s", "ttft_p95_s", "decode_pending_p95_s"}
    assert r["latency"]["ttft_p95_s"] is None  # vllm-router exports no TTFT: null
    b = r["backends"][0]
    for key in ("url", "target", "role", "healthy", "breaker_open", "routed_share",
                "requests_per_s"):
        assert key in b
    assert all(e["router"] == "router" for e in doc["engines"])
    json.dumps(doc, allow_nan=False)


def test_pd_roles_reach_engine_rows():
    router = fixture_text("routers/vllm-router-pd-SYNTHETIC-metrics-rs.txt")
    s = store_with(target("r", 29000), target("p", 8101), target("d", 8102))
    calm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    for t, k in ((0.0, 1.0), (2.0, 2.0)):
        feed(s, "r", t, scaled(router, k))
        feed(s, "p", t, calm)
        feed(s, "d", t, calm)
    snap = s.snapshot(10.0)
    roles = {e.target: e.role for e in snap.engines}
    assert roles == {"p": "prefill", "d": "decode"}
    [r] = snap.routers
    assert r.requests_per_s == pytest.approx(40 / 2)
    decode = [b for b in r.backends if b.role == "decode"]
    assert [b.routed_share for b in decode] == [pytest.approx(0.5)] * 2
    assert (r.healthy_backends, r.open_breakers) == (2, 1)
    dead = next(b for b in decode if b.url.endswith("8103"))
    assert dead.target is None and dead.healthy is False and dead.breaker_open is True


def test_router_down_is_a_state_with_an_event_and_no_traceback():
    from llmtop.model import RawScrape

    s = round_robin_store()
    s.ingest(RawScrape(target="router", url="u", t_wall=1.7e9 + 9, t_mono=9.0, status="down",
                       error="connection refused"))
    s.commit(9.0, 1.7e9 + 9)
    [r] = s.snapshot(10.0).routers
    assert r.state == "down" and r.error == "connection refused"
    assert any(e.target == "router" and "DOWN" in e.text for e in s.events)


def test_router_counter_reset_starts_the_rates_again_from_the_reset():
    """Counters x5, x6, then reset to x0.1, x0.2 of the fixture's (120 processed, 60 per
    worker, 2 retries): the window starts again at the reset, so each rate is its last
    second's, never negative and never the drop before it."""
    router = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt")
    s = store_with(target("router", 29000))
    for t, k in ((0.0, 5.0), (1.0, 6.0), (2.0, 0.1), (3.0, 0.2)):
        feed(s, "router", t, scaled(router, k))
    [r] = s.snapshot(10.0).routers
    assert r.requests_per_s == pytest.approx(24.0 - 12.0)  # over the 1 s since the reset
    assert r.retries_per_s == pytest.approx(0.4 - 0.2)
    assert [(b.url, b.requests_per_s) for b in r.backends] == [
        ("http://127.0.0.1:8001", pytest.approx(12.0 - 6.0)),
        ("http://127.0.0.1:8002", pytest.approx(12.0 - 6.0))]
    assert [b.routed_share for b in r.backends] == [pytest.approx(0.5)] * 2


def test_gauge_only_router_rates_and_links_to_engines():
    """The production-stack router: QPS gauges are its rates; its servers link to engines."""
    body = fixture_text("routers/production-stack-SYNTHETIC.txt").replace(
        "127.0.0.5:8000", "127.0.0.1:8001").replace("127.0.0.6:8000", "127.0.0.1:8002")
    s = store_with(target("ps", 8080), target("a", 8001), target("b", 8002))
    calm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    for t in (0.0, 1.0):
        feed(s, "ps", t, body)
        feed(s, "a", t, calm)
        feed(s, "b", t, calm)
    snap = s.snapshot(10.0)
    [r] = snap.routers
    assert r.engine == "production-stack" and r.requests_per_s == 8.0
    assert [b.routed_share for b in r.backends] == [pytest.approx(0.75), pytest.approx(0.25)]
    assert {e.target: e.router for e in snap.engines} == {"a": "ps", "b": "ps"}
    assert (r.healthy_backends, r.total_backends) == (2, 2)


def test_epp_counts_ready_pods():
    s = store_with(target("epp", 9090))
    body = fixture_text("routers/gie-epp-testdata.txt")
    feed(s, "epp", 0.0, body)
    feed(s, "epp", 1.0, scaled(body, 3.0))
    [r] = s.snapshot(10.0).routers
    assert r.engine == "gie-epp" and r.healthy_backends == 2 and r.total_backends == 2
    assert r.requests_per_s == pytest.approx(8.0)


def test_detail_rows_keep_router_and_role():
    s = round_robin_store()
    s.snapshot(10.0)
    assert s.row("a|tiny-llama", 60.0).router == "router"


@pytest.mark.parametrize("capture", ["vllm-router-rr", "sglang-router-rr"])
def test_real_round_robin_captures_say_each_breaker_and_share(capture):
    """What the real-router test (tests/real_engine/test_real_routers.py) holds each router
    to: both name every worker's breaker (cb_state) and what it was sent, so neither is
    None on a healthy round robin."""
    body = fixture_text(f"routers/real/{capture}.txt")
    s = store_with(target("router", 29000))
    for t, k in ((0.0, 1.0), (2.0, 2.0)):
        feed(s, "router", t, scaled(body, k))
    [r] = s.snapshot(10.0).routers
    assert (r.open_breakers, r.healthy_backends, r.total_backends) == (0, 2, 2)
    assert [(b.healthy, b.breaker_open) for b in r.backends] == [(True, False)] * 2
    assert [b.routed_share for b in r.backends] == [pytest.approx(0.5, abs=0.01)] * 2
