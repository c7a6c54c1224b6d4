"""The adapters on real captures of vllm-router 0.1.17 and sglang-router 0.3.2 on this machine
(tests/fixtures/routers/real, by helper h42demo: each file's first lines say the command,
the workers and the load)."""

from __future__ import annotations

import pytest

from llmtop.parse import detect, registry
from tests.conftest import fixture_text

from .build import feed, scaled, store_with, target


def real(name):
    body = fixture_text(f"routers/real/{name}.txt")
    engine = detect.detect_engine(body)
    return engine, registry.normalize(engine, body).extra["router"], body


def workers(body):
    line = next(x for x in body.splitlines() if x.startswith("# workers:"))
    a = line.split("A=")[1].split()[0]
    b = line.split("B=")[1].split()[0].rstrip(",")
    return a, b


@pytest.mark.parametrize("router", ["vllm-router", "sglang-router"])
def test_round_robin_real(router):
    engine, rs, body = real(f"{router}-rr")
    assert engine == router and rs.policy == "round_robin"
    a, b = workers(body)
    assert set(rs.backends) == {a, b}
    ra, rb = (rs.backends[u].routed for u in (a, b))
    assert ra is not None and rb is not None
    assert abs(ra - rb) <= 1 and rs.requests == ra + rb
    assert all(x.healthy == 1.0 and x.breaker == 0.0 for x in rs.backends.values())
    assert rs.request is not None


@pytest.mark.parametrize("router", ["vllm-router", "sglang-router"])
def test_killed_backend_real(router):
    _, rs, body = real(f"{router}-down")
    a, b = workers(body)
    assert (rs.backends[b].healthy, rs.backends[b].breaker) == (0.0, 1.0)
    assert rs.backends[b].failures == 10.0
    assert rs.backends[a].healthy == 1.0


def test_vllm_router_pd_real_roles_and_decode_pending():
    _, rs, body = real("vllm-router-pd")
    a, b = workers(body)
    assert (rs.backends[a].role, rs.backends[b].role) == ("prefill", "decode")
    assert rs.requests == 116.0  # pd_requests_total, once per request
    assert rs.backends[b].pending == 0.0  # the rank="aggregate" series
    h = rs.decode_pending  # a summary: mean only
    assert h is not None and h.count == 116 and h.bounds == ()


def test_sglang_router_pd_real_has_no_roles_per_url():
    _, rs, _ = real("sglang-router-pd")
    assert {b.role for b in rs.backends.values()} == {None}  # worker_type is not per URL


def test_real_pd_router_row_over_a_window():
    body = fixture_text("routers/real/vllm-router-pd.txt")
    s = store_with(target("r", 35789))
    feed(s, "r", 0.0, body)
    feed(s, "r", 5.0, scaled(body, 2.0))
    [r] = s.snapshot(10.0).routers
    assert r.requests_per_s == pytest.approx(116 / 5)
    assert r.decode_pending_s is not None and r.decode_pending_s.p95 is None  # summary
    assert r.decode_pending_s.mean == pytest.approx(1.189475676 / 116)
    assert r.to_json()["latency"]["decode_pending_p95_s"] is None
    assert {b.role for b in r.backends} == {"prefill", "decode"}
    assert all(b.routed_share == 1.0 for b in r.backends)  # one per pool
