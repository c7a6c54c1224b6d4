"""Topology from rows: linking by host:port, roles (router, engine, pod labels), pools,
capacity shares and the TTFT path."""

from __future__ import annotations

import pytest

from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.link import host_port, link_stack
from llmtop.topology.path import ttft_path
from llmtop.topology.pools import build_pools
from llmtop.topology.roles import role_from_labels
from llmtop.topology.stack import build_stack
from tests.diagnose.rows import healthy, q


def test_host_port_loopback_and_defaults():
    assert host_port("http://localhost:8000") == ("127.0.0.1", 8000)
    assert host_port("http://0.0.0.0:8000/") == ("127.0.0.1", 8000)
    assert host_port("https://h.example") == ("h.example", 443)
    assert host_port("10.0.0.5:9") == ("10.0.0.5", 9)
    assert host_port("http://[::1]:7") == ("127.0.0.1", 7)
    assert host_port("") is None and host_port("http://x:notaport") is None
    assert host_port("http://localhost.localdomain:8000") == ("127.0.0.1", 8000)
    assert host_port("http://127.0.0.2:8000") == ("127.0.0.2", 8000)  # another socket


@pytest.mark.parametrize("labels,role", [
    ({"llm-d.ai/role": "prefill"}, "prefill"),
    ({"label_llm_d_ai_role": "decode"}, "decode"),
    ({"nvidia.com/dynamo-component-type": "worker",
      "nvidia.com/dynamo-sub-component-type": "prefill"}, "prefill"),
    ({"nvidia.com/dynamo-component-type": "decode"}, "decode"),
    ({"app.kubernetes.io/component": "llminferenceservice-workload-prefill"}, "prefill"),
    ({"app.kubernetes.io/component": "llminferenceservice-workload"}, "both"),
    ({"app": "vllm"}, None),
    (None, None),
])
def test_roles_from_pod_labels(labels, role):
    assert role_from_labels(labels) == role


def _pd():
    p = healthy("p", running=4.0, waiting=9.0, max_running=4.0, queue_s=q(1.0, 2.0, 40),
                prefill_s=q(0.5, 0.9, 40), ttft_s=q(1.6, 3.0, 40))
    d1 = healthy("d1", running=2.0, max_running=8.0, kv_cache_usage=0.2,
                 queue_s=q(0.01, 0.02, 40), ttft_s=q(0.3, 0.5, 40), itl_s=q(0.02, 0.03, 900))
    d2 = healthy("d2", labels={"llm-d.ai/role": "decode"}, running=2.0, max_running=24.0,
                 kv_cache_usage=0.4, queue_s=q(0.01, 0.02, 40), ttft_s=q(0.3, 0.5, 40),
                 itl_s=q(0.02, 0.05, 900))
    r = RouterRow(target="r", engine="vllm-router", decode_pending_s=q(0.2, 0.4, 40),
                  backends=[BackendRow("http://h:1", role="prefill", requests_per_s=2.0),
                            BackendRow("http://h:2", role="decode", requests_per_s=1.0),
                            BackendRow("http://h:3", requests_per_s=1.0)])
    urls = {"p": "http://h:1", "d1": "http://h:2", "d2": "http://h:3/metrics"}
    link_stack([p, d1, d2], [r], urls)
    return [p, d1, d2], r


def test_link_roles_router_then_labels_and_capacity_shares():
    (p, d1, d2), r = _pd()
    assert (p.router, p.role) == ("r", "prefill")
    assert (d1.router, d1.role) == ("r", "decode")
    assert (d2.router, d2.role) == ("r", "decode")  # from its pod label; given to the backend
    assert r.backends[2].role == "decode" and r.backends[2].target == "d2"
    # decode pool: seats 8 and 24
    assert r.backends[1].capacity_share == pytest.approx(0.25)
    assert r.backends[2].capacity_share == pytest.approx(0.75)


def test_pools_sum_like_a_group():
    rows, _r = _pd()
    pools = {p.role: p for p in build_pools(rows)}
    assert pools["prefill"].waiting == 9.0 and pools["prefill"].busy == pytest.approx(13 / 4)
    dec = pools["decode"]
    assert dec.targets == ["d1", "d2"] and dec.running == 4.0 and dec.max_running == 32.0
    assert dec.kv_usage == pytest.approx(0.3) and dec.itl_p95_s == 0.05


def test_ttft_path_pd():
    rows, r = _pd()
    stages = {s.name: s.seconds for s in ttft_path(r, rows)}
    assert stages["prefill_queue"] == pytest.approx(1.0)
    assert stages["prefill"] == pytest.approx(0.5)
    assert stages["transfer"] == pytest.approx(0.2)  # the router's decode-pending mean
    assert stages["decode_queue"] == pytest.approx(0.01)
    assert stages["first_token"] == pytest.approx(0.3 - 0.01 - 0.2)
    assert "router" not in stages  # no router TTFT, and P/D: request time is not comparable


def test_ttft_path_router_overhead_and_missing_numbers():
    a = healthy("a", e2e_s=q(2.0, 3.0, 10))
    r = RouterRow(target="r", request_s=q(2.5, 4.0, 10),
                  backends=[BackendRow("http://h:1", requests_per_s=1.0)])
    link_stack([a], [r], {"a": "http://h:1"})
    stages = {s.name: s.seconds for s in ttft_path(r, [a])}
    assert stages["router"] == pytest.approx(0.5)
    bare = RouterRow(target="x")
    assert ttft_path(bare, []) == []


def test_build_stack_groups_backends():
    rows, r = _pd()
    st = build_stack(rows, [r])
    assert [e.target for e in st.backends["r"]] == ["p", "d1", "d2"]
    assert set(st.pools_of("r")) == {"prefill", "decode"}


def test_capacity_share_basis_kv_when_seats_are_unknown():
    a = healthy("a", max_running=None, kv_capacity_tokens=3000.0)
    b = healthy("b", max_running=None, kv_capacity_tokens=1000.0)
    r = RouterRow(target="r", backends=[BackendRow("http://h:1"), BackendRow("http://h:2")])
    link_stack([a, b], [r], {"a": "http://h:1", "b": "http://h:2"})
    assert [(x.capacity_share, x.capacity_basis) for x in r.backends] == [
        (0.75, "kv"), (0.25, "kv")]
    b.kv_capacity_tokens = None
    r2 = RouterRow(target="r", backends=[BackendRow("http://h:1"), BackendRow("http://h:2")])
    link_stack([a, b], [r2], {"a": "http://h:1", "b": "http://h:2"})
    assert [x.capacity_share for x in r2.backends] == [None, None]
