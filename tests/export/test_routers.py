"""``llmtop_router_*`` and the engine series' ``role`` label, scraped from the exporter over
HTTP; the router rows come from the real vLLM router's metric names through the store."""

from __future__ import annotations

import httpx
import pytest

from llmtop.export.server import MetricsServer
from llmtop.export.state import ExportState
from llmtop.model import Snapshot
from tests.conftest import fixture_text
from tests.export.test_vs_once import samples
from tests.stack.build import feed, round_robin_store, scaled, store_with, target


def _scrape(snap: Snapshot) -> dict:
    state = ExportState("direct", process_metrics=False)
    state.update(snap, [])
    srv = MetricsServer(state.render, "127.0.0.1:0")
    try:
        r = httpx.get(srv.url, timeout=5)
        assert r.status_code == 200
        return samples(r.text)
    finally:
        srv.close()


def _get(got: dict, name: str, **labels: str) -> float | None:
    return got.get((name, frozenset(labels.items())))


def test_router_series_equal_the_router_row():
    snap = round_robin_store().snapshot(10.0)
    [router] = snap.routers
    got = _scrape(snap)
    rl = {"target": "router", "engine": "vllm-router"}
    assert _get(got, "llmtop_router_up", **rl) == 1.0
    assert _get(got, "llmtop_router_requests_per_second", **rl) == pytest.approx(
        router.requests_per_s)
    assert _get(got, "llmtop_router_backends", **rl) == 2.0
    assert _get(got, "llmtop_router_backends_healthy", **rl) == 2.0
    assert _get(got, "llmtop_router_open_breakers", **rl) == 0.0
    assert _get(got, "llmtop_router_latency_seconds", **rl, kind="request",
                quantile="0.95") == pytest.approx(router.request_s.p95)
    # the vLLM router exports no TTFT: absent, never 0
    assert not any(k[0] == "llmtop_router_latency_seconds" and ("kind", "ttft") in k[1]
                   for k in got)
    for url, tgt in (("http://127.0.0.1:8001", "a"), ("http://127.0.0.1:8002", "b")):
        bl = {**rl, "backend": url, "backend_target": tgt}
        assert _get(got, "llmtop_router_backend_routed_ratio", **bl) == pytest.approx(0.5)
        assert _get(got, "llmtop_router_backend_healthy", **bl) == 1.0
        assert _get(got, "llmtop_router_backend_breaker_open", **bl) == 0.0
    # a router is no engine
    assert not any(k[0].startswith("llmtop_engine_") and ("target", "router") in k[1]
                   for k in got)


def test_roles_label_engine_series_and_a_dead_backend_is_named():
    router = fixture_text("routers/vllm-router-pd-SYNTHETIC-metrics-rs.txt")
    s = store_with(target("r", 29000), target("p", 8101), target("d", 8102))
    calm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    for t, k in ((0.0, 1.0), (2.0, 2.0)):
        feed(s, "r", t, scaled(router, k))
        feed(s, "p", t, calm)
        feed(s, "d", t, calm)
    got = _scrape(s.snapshot(10.0))
    roles = {dict(k[1]).get("target"): dict(k[1]).get("role") for k in got
             if k[0] == "llmtop_engine_up"}
    assert roles == {"p": "prefill", "d": "decode"}
    assert any(k[0] == "llmtop_engine_running" and ("role", "decode") in k[1] for k in got)
    dead = {"target": "r", "engine": "vllm-router", "backend": "http://127.0.0.1:8103",
            "role": "decode"}
    assert _get(got, "llmtop_router_backend_breaker_open", **dead) == 1.0
    assert _get(got, "llmtop_router_backend_healthy", **dead) == 0.0
    assert _get(got, "llmtop_router_open_breakers", target="r", engine="vllm-router") == 1.0


def test_a_router_down_keeps_up_and_info_only():
    from llmtop.model import RawScrape

    s = round_robin_store()
    s.ingest(RawScrape(target="router", url="u", t_wall=1.7e9 + 9, t_mono=9.0, status="down",
                       error="connection refused"))
    s.commit(9.0, 1.7e9 + 9)
    got = _scrape(s.snapshot(10.0))
    names = {k[0] for k in got if ("target", "router") in k[1]}
    assert names == {"llmtop_router_up", "llmtop_router_info"}
    assert _get(got, "llmtop_router_up", target="router", engine="vllm-router") == 0.0
