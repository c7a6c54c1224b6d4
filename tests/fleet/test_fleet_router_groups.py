"""Fleet mode links a router's backends to engine rows however the fleet is grouped
(``--group-by instance``, ``namespace,pod``, ``job``...): the stack query's roles part gives
each row's member ``instance`` values and pods (``fleet/stack.py``), and a backend URL links
to the row whose members hold its ``host:port``, also when the router names the pod by its
pod-IP DNS name or its StatefulSet name. The router's answers are the real vLLM router's
captured /metrics (workers renamed); the engine rows are built by the fleet's own row code
from constructed Prometheus answers."""

from __future__ import annotations

import asyncio
import copy

import pytest

from llmtop.config import Config, PrometheusConfig
from llmtop.console.once_stack import stack_lines
from llmtop.demo.fleet import find_binary, start_prometheus
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.rows import build_rows, split_groups, target_name
from llmtop.fleet.stack import fleet_stack
from llmtop.model import EngineRow, Snapshot
from llmtop.topology.link import link_stack, merge_backends
from llmtop.ui.groups import stack_groups
from tests.conftest import fixture_text
from tests.stack.build import scaled

from .conftest import _missing
from .test_fleet_routers import ROUTER, _answer, _Served, _until_scraped

_A, _B = "http://127.0.0.1:39201", "http://127.0.0.1:38637"  # the fixture's workers
ROUTER_AT = "127.0.1.9:9000"
PODS = (  # (namespace, pod, instance, job, max_num_seqs)
    ("ns", "vllm-0", "127.0.1.5:8000", "vllm-small", 1.0),
    ("ns", "vllm-1", "127.0.1.6:8000", "vllm-big", 8.0),
    ("ns", "vllm-2", "127.0.1.7:8000", "vllm-big", 8.0),
)


def _engine_answer(pods=PODS) -> list[dict]:
    """``vllm:num_requests_running`` as the gauges query answers it (one series per pod)."""
    return [{"metric": {"llmtop_name": "vllm:num_requests_running", "namespace": ns, "pod": p,
                        "instance": i, "job": j, "model_name": "m"}, "value": [0, "1"]}
            for ns, p, i, j, _ in pods]


def _roles_answer(group: tuple[str, ...], pods=PODS) -> list[dict]:
    """The stack query's roles part: ``group by (G, job, instance, pod, roles...)``."""
    out = []
    for ns, p, i, j, _ in pods:
        full = {"namespace": ns, "pod": p, "instance": i, "job": j}
        keep = {k: v for k, v in full.items() if k in (*group, "job", "instance", "pod")}
        out.append({"metric": {**keep, "llmtop_name": "llmtop_roles"}, "value": [0, "1"]})
    return out


def _rows(group: tuple[str, ...], pods=PODS) -> list[EngineRow]:
    rows, _ = build_rows(split_groups([copy.deepcopy(_engine_answer(pods))], group), group, 10.0)
    seats: dict[str, float] = {}
    for ns, p, i, j, m in pods:  # a grouped row's running limit is its members' sum
        t = target_name({"namespace": ns, "pod": p, "instance": i, "job": j}, group)
        seats[t] = seats.get(t, 0.0) + m
    for r in rows:
        r.max_running = seats[r.target]
    return rows


def _stack(group: tuple[str, ...], urls: dict[str, str], rows: list[EngineRow], pods=PODS):
    text = scaled(ROUTER, 1.0, urls=urls)
    base = _answer(scaled(text, 0.5), "router", ROUTER_AT)
    for it in base:
        it["metric"]["llmtop_base"] = "1"
    results = {"stack": [*_answer(text, "router", ROUTER_AT), *base,
                         *_roles_answer(group, pods)]}
    [r] = fleet_stack(results, group, 1000.0, 10.0, rows)
    order = [urls[_A], urls[_B]]  # the fixture's A (66 requests) then B (65)
    r.backends.sort(key=lambda b: order.index(b.url))
    return r


def test_grouped_by_instance_links_exact_host_port_and_a_statefulset_name():
    rows = _rows(("instance",))
    # the router names vllm-0 by its IP with a path, vllm-1 by its headless-service name
    r = _stack(("instance",), {_A: "http://127.0.1.5:8000/v1",
                               _B: "http://vllm-1.vllm.ns.svc.cluster.local:8000"}, rows)
    assert [b.target for b in r.backends] == ["127.0.1.5:8000", "127.0.1.6:8000"]
    assert [b.capacity_share for b in r.backends] == pytest.approx([1 / 9, 8 / 9])
    assert {x.target: x.router for x in rows} == {
        "127.0.1.5:8000": ROUTER_AT, "127.0.1.6:8000": ROUTER_AT, "127.0.1.7:8000": None}


def test_grouped_by_pod_links_ip_and_pod_ip_dns_names():
    rows = _rows(("namespace", "pod"))
    assert {x.target for x in rows} == {"ns/vllm-0", "ns/vllm-1", "ns/vllm-2"}
    r = _stack(("namespace", "pod"), {_A: "https://127.0.1.5:8000",
                                      _B: "http://127-0-1-6.ns.pod.cluster.local:8000/"}, rows)
    assert [b.target for b in r.backends] == ["ns/vllm-0", "ns/vllm-1"]
    assert [b.capacity_share for b in r.backends] == pytest.approx([1 / 9, 8 / 9])
    assert r.backends[0].routed_share == pytest.approx(66 / 131)  # the router's own number
    assert {x.target: x.router for x in rows}["ns/vllm-2"] is None


def test_grouped_by_job_links_to_the_row_holding_the_instance():
    rows = _rows(("job",))
    assert {x.target: x.max_running for x in rows} == {"vllm-small": 1.0, "vllm-big": 16.0}
    r = _stack(("job",), {_A: "http://127.0.1.5:8000", _B: "http://127.0.1.7:8000"}, rows)
    assert [b.target for b in r.backends] == ["vllm-small", "vllm-big"]
    # vllm-big is two engines: the router sends to one of them, the pool is both
    assert [b.capacity_share for b in r.backends] == pytest.approx([1 / 17, 16 / 17])
    assert all(x.router == ROUTER_AT for x in rows)


def test_two_backends_in_one_aggregate_row_keep_their_shares_and_no_capacity_share():
    rows = _rows(("job",))
    r = _stack(("job",), {_A: "http://127.0.1.6:8000", _B: "http://127.0.1.7:8000"}, rows)
    assert [b.target for b in r.backends] == ["vllm-big", "vllm-big"]
    assert [b.routed_share for b in r.backends] == pytest.approx([66 / 131, 65 / 131])
    assert [b.capacity_share for b in r.backends] == [None, None]  # unknown, not halves
    [(key, cell)] = stack_groups(rows, [r]).backends.items()  # the row's cells: their sum
    assert key == "vllm-big|m" and cell.routed_share == pytest.approx(1.0)
    assert cell.url == "http://127.0.1.6:8000, http://127.0.1.7:8000"
    assert {x.target: x.router for x in rows}["vllm-small"] is None


def test_a_backend_without_a_row_stays_unlinked_and_says_so():
    rows = _rows(("namespace", "pod"))
    r = _stack(("namespace", "pod"), {_A: "http://127.0.1.5:8000",
                                      _B: "http://127.0.9.9:8000"}, rows)
    a, b = r.backends
    assert a.target == "ns/vllm-0" and b.target is None
    assert a.capacity_share is None and b.capacity_share is None  # the pool is not all known
    lines = stack_lines(Snapshot(time=0.0, window_s=10.0, engines=rows, routers=[r]))
    assert "backend http://127.0.9.9:8000 → not scraped" in "\n".join(lines)
    assert [x.router for x in rows] == [ROUTER_AT, None, None]


def test_a_name_two_rows_share_links_to_neither():
    pods = (("ns-a", "vllm-0", "127.0.1.5:8000", "a", 1.0),
            ("ns-b", "vllm-0", "10.0.1.5:8000", "b", 8.0))
    rows = _rows(("namespace", "pod"), pods)
    r = _stack(("namespace", "pod"), {_A: "http://vllm-0.svc:8000",
                                      _B: "http://vllm-0.vllm.ns-b.svc.cluster.local:8000"},
               rows, pods)
    assert [b.target for b in r.backends] == [None, None]


def test_direct_mode_keeps_exact_matching():
    from llmtop.model.stack import BackendRow, RouterRow

    row = EngineRow(key="a|m", target="a", engine="vllm", model="m")
    r = RouterRow(target="r", backends=[BackendRow(url="http://127-0-1-5.ns.pod.cluster.local:1")])
    link_stack([row], [r], {"a": "http://127.0.1.5:1"})
    assert r.backends[0].target is None
    link_stack([row], [r], {"a": "http://127.0.1.5:1"}, loose=True)
    assert r.backends[0].target == "a"


def test_merge_backends_of_one():
    from llmtop.model.stack import BackendRow

    b = BackendRow(url="u", routed_share=0.3)
    assert merge_backends([b]) is b



@pytest.mark.ci_step
@pytest.mark.parametrize("group", [("namespace", "pod"), ("job",)])
def test_real_prometheus_links_backends_grouped_by_pod_or_job(tmp_path, group):
    """A real Prometheus scraping the router (captured /metrics, workers renamed to two of
    three served engines; it names b by its StatefulSet DNS name) and the engines with pod
    labels in two jobs: the backends link to the pod rows, or the job rows."""
    if not find_binary("prometheus"):
        _missing("prometheus")
    calm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    served = _Served({"a": calm, "b": calm, "c": calm})
    a, b, c = served.addr("a"), served.addr("b"), served.addr("c")
    b_name = f"vllm-b.vllm.ns.svc.cluster.local:{b.rsplit(':', 1)[1]}"
    served2 = _Served({"router": scaled(ROUTER, 1.0, urls={_A: f"http://{a}",
                                                           _B: f"http://{b_name}"})})
    prom = None

    def pod(addr: str, name: str) -> dict:
        return {"targets": [addr], "labels": {"namespace": "ns", "pod": name}}

    try:
        cfg = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": "router", "static_configs": [{"targets": [served2.addr("router")]}]},
            {"job_name": "vllm-small", "static_configs": [pod(a, "vllm-a")]},
            {"job_name": "vllm-big", "static_configs": [pod(b, "vllm-b"), pod(c, "vllm-c")]}]}
        prom = start_prometheus(cfg, str(tmp_path))
        _until_scraped(prom.url, 6)
        conf = Config(prometheus=PrometheusConfig(url=prom.url, window_s=4.0,
                                                  scrape_interval_s=1.0, group_by=group))

        async def go():
            mon = FleetMonitor(conf)
            try:
                return await mon.tick()
            finally:
                await mon.aclose()

        snap = asyncio.run(go())
    finally:
        if prom is not None:
            prom.stop()
        served.close()
        served2.close()
    [r] = snap.routers
    routed = {x.target: x.router for x in snap.engines}
    by_url = {x.url: x.target for x in r.backends}
    if group == ("job",):
        assert by_url == {f"http://{a}": "vllm-small", f"http://{b_name}": "vllm-big"}
        assert routed == {"vllm-small": r.target, "vllm-big": r.target}
    else:
        assert by_url == {f"http://{a}": "ns/vllm-a", f"http://{b_name}": "ns/vllm-b"}
        assert routed == {"ns/vllm-a": r.target, "ns/vllm-b": r.target, "ns/vllm-c": None}
