"""Fleet GPUs linked to the engine rows they serve (``llmtop/fleet/gpulink.py``), and the
``gpu_throttle`` finding that follows, on real DCGM exporter text (``tests/fixtures/metrics``)
scraped the way Prometheus stores it (target labels added, empty labels dropped, clashing
target labels turning the exporter's into ``exported_*``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmtop.config import Config, PrometheusConfig
from llmtop.diagnose import diagnose
from llmtop.diagnose.engine import gpus_by_target
from llmtop.fleet.gpulink import host_of, link_gpus
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.queries import Plan
from llmtop.fleet.rows import Series, gpu_records
from llmtop.fleet.states import StateInfo
from llmtop.model import EngineRow, GpuRecord
from llmtop.parse.exposition import parse

from .conftest import refresh_once

METRICS = Path(__file__).parents[1] / "fixtures" / "metrics"
EDGE = (METRICS / "dcgm-HANDMADE-edge-mig-k8s.txt").read_text()
"""Two GPUs on ``Hostname="node-a"``; GPU 1 serves pod ``llm/vllm-0`` (container ``vllm``);
GPU 0 holds 71234 MiB and reports clock-event mask 4 (power cap)."""
README = (METRICS / "dcgm-exporter-readme.txt").read_text()
"""One GPU, no ``Hostname``, no pod mapping."""
README_K8S = (METRICS / "dcgm-exporter-readme-k8s.txt").read_text()
"""The same with ``pod=""``/``namespace=""``/``container=""`` (no consumer)."""

GPU0 = 'gpu="0",UUID="GPU-aaaa"'
HW_SLOWDOWN = 72
"""NVML clock-event bits 0x08 (HW slowdown) | 0x40 (HW thermal slowdown)."""


def throttled(text: str = EDGE, mask: int = HW_SLOWDOWN) -> str:
    """The edge fixture with GPU 0's clock-event reasons set to ``mask``."""
    old = next(ln for ln in text.splitlines()
               if ln.startswith("DCGM_FI_DEV_CLOCKS_EVENT_REASONS{") and GPU0 in ln)
    return text.replace(old, old.rsplit(" ", 1)[0] + f" {mask}")


def on_host(text: str, host: str) -> str:
    return text.replace('Hostname="node-a"', f'Hostname="{host}"')


def gpu0_serves(text: str, namespace: str, pod: str) -> str:
    """GPU 0's series with the pod mapping the exporter writes for a consumer pod."""
    return text.replace(f'{GPU0},', f'{GPU0},namespace="{namespace}",pod="{pod}",'
                        'container="vllm",')


def scraped(text: str, instance: str, *, job: str = "dcgm",
            target: dict[str, str] | None = None) -> dict[str, list[Series]]:
    """``text`` as a Prometheus server stores it for a target at ``instance``."""
    tl = {"instance": instance, "job": job, **(target or {})}
    out: dict[str, list[Series]] = {}
    for fam in parse(text).values():
        for s in fam.samples:
            labels = {k: v for k, v in s.labels.items() if v}
            for k in tl:
                if k in labels:  # honor_labels: false
                    labels["exported_" + k] = labels.pop(k)
            out.setdefault(s.name, []).append(({**labels, **tl}, s.value))
    return out


def merged(*parts: dict[str, list[Series]]) -> dict[str, list[Series]]:
    out: dict[str, list[Series]] = {}
    for p in parts:
        for name, items in p.items():
            out.setdefault(name, []).extend(items)
    return out


def row(target: str, model: str = "m", **labels: str) -> EngineRow:
    return EngineRow(key=f"{target}|{model}", target=target, engine="vllm", model=model,
                     labels={**labels, "job": "vllm"})


def inst_row(instance: str) -> EngineRow:
    return row(instance, instance=instance)


def pod_row(namespace: str, pod: str) -> EngineRow:
    return row(f"{namespace}/{pod}", namespace=namespace, pod=pod)


def linked(rows: list[EngineRow], gpus: list[GpuRecord]) -> dict[str, list[tuple[str, int]]]:
    link_gpus(rows, gpus)
    return {t: sorted((g.host, g.index) for g in gs) for t, gs in gpus_by_target(gpus).items()}


# ---------------------------------------------------------------- by pod
def test_pod_link_from_the_dcgm_pod_mapping():
    gpus = gpu_records(scraped(EDGE, "10.0.0.9:9400"))
    rows = [pod_row("llm", "vllm-0"), pod_row("llm", "vllm-1"), pod_row("other", "vllm-0")]
    assert linked(rows, gpus) == {"llm/vllm-0": [("node-a", 1)]}
    (p,) = next(g for g in gpus if g.index == 1).processes
    assert p.name == "llm/vllm-0/vllm" and p.engine_target == "llm/vllm-0"
    assert next(g for g in gpus if g.index == 0).processes == []  # no pod, no host link


def test_exported_pod_link_when_the_exporter_pod_labels_clash():
    # scraped through a ServiceMonitor: the target's own pod/namespace are the exporter's
    series = scraped(EDGE, "10.0.0.9:9400",
                     target={"pod": "dcgm-exporter-x7", "namespace": "gpu-operator"})
    assert any("exported_pod" in lab for lab, _v in series["DCGM_FI_DEV_GPU_UTIL"])
    gpus = gpu_records(series)
    assert linked([pod_row("llm", "vllm-0"), pod_row("llm", "vllm-1")], gpus) == {
        "llm/vllm-0": [("node-a", 1)]}


def test_pod_without_namespace_on_the_row_matches_the_pod_alone():
    gpus = gpu_records(scraped(EDGE, "10.0.0.9:9400"))
    r = row("vllm-0", pod="vllm-0")  # --group-by pod
    assert linked([r], gpus) == {"vllm-0": [("node-a", 1)]}


def test_same_pod_name_in_two_namespaces_is_no_link_for_a_pod_only_row():
    gpus = gpu_records(merged(scraped(EDGE, "10.0.0.9:9400"),
                              scraped(on_host(EDGE, "node-b").replace('namespace="llm"',
                                                                       'namespace="dev"'),
                                      "10.0.0.10:9400")))
    a, b = row("vllm-0", pod="vllm-0"), row("vllm-0@dev", pod="vllm-0")
    # two rows named by pod only: which namespace's vllm-0 is which is not knowable
    assert linked([a, b], gpus) == {}


def test_a_gpu_of_another_pod_is_not_host_linked_when_rows_carry_pods():
    gpus = gpu_records(scraped(EDGE, "node-a:9400"))
    r = row("node-a:8000/llm/vllm-1", instance="node-a:8000", namespace="llm", pod="vllm-1")
    got = linked([r], gpus)
    # GPU 1 names llm/vllm-0 as its consumer: not this engine's, whatever the host says
    assert got == {"node-a:8000/llm/vllm-1": [("node-a", 0)]}


# ---------------------------------------------------------------- by host
def test_host_link_with_one_engine_on_the_host():
    gpus = gpu_records(scraped(EDGE, "10.0.0.9:9400"))  # Hostname node-a wins
    got = linked([inst_row("node-a:8000"), inst_row("node-b:8000")], gpus)
    assert got == {"node-a:8000": [("node-a", 0), ("node-a", 1)]}
    added = [p for g in gpus for p in g.processes if p.name == "engine on host node-a"]
    assert len(added) == 2 and all(p.pid is None for p in added)


def test_host_link_by_the_exporters_instance_when_there_is_no_hostname():
    gpus = gpu_records(scraped(README, "10.0.0.7:9400"))
    assert [g.host for g in gpus] == ["10.0.0.7"]
    assert linked([inst_row("10.0.0.7:8000"), inst_row("10.0.0.8:8000")], gpus) == {
        "10.0.0.7:8000": [("10.0.0.7", 0)]}


def test_no_host_link_with_two_engines_on_the_host():
    gpus = gpu_records(scraped(EDGE, "10.0.0.9:9400"))
    assert linked([inst_row("node-a:8000"), inst_row("node-a:8001")], gpus) == {}
    assert all(p.engine_target is None for g in gpus for p in g.processes)


def test_one_engine_with_two_models_is_still_one_engine_on_the_host():
    gpus = gpu_records(scraped(README_K8S, "10.0.0.7:9400"))
    rows = [row("10.0.0.7:8000", "a", instance="10.0.0.7:8000"),
            row("10.0.0.7:8000", "b", instance="10.0.0.7:8000")]
    assert linked(rows, gpus) == {"10.0.0.7:8000": [("10.0.0.7", 0)]}


def test_no_link_across_hosts():
    gpus = gpu_records(merged(scraped(EDGE, "10.0.0.9:9400"),
                              scraped(README, "10.0.0.7:9400")))
    assert linked([inst_row("node-b:8000"), inst_row("10.0.0.8:8000")], gpus) == {}


def test_no_host_link_for_a_gpu_holding_no_memory():
    text = EDGE.replace('Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 71234',
                        'Hostname="node-a",DCGM_FI_DRIVER_VERSION="550.54.15"} 3')
    gpus = gpu_records(scraped(text, "10.0.0.9:9400"))
    assert next(g for g in gpus if g.index == 0).mem_used_bytes == 3 * 2**20
    # GPU 0 is empty (3 MiB): no engine lives there; GPU 1 holds 1 GiB
    assert linked([inst_row("node-a:8000")], gpus) == {"node-a:8000": [("node-a", 1)]}


def test_linking_twice_adds_nothing():
    gpus = gpu_records(scraped(EDGE, "10.0.0.9:9400"))
    rows = [inst_row("node-a:8000")]
    assert link_gpus(rows, gpus) == 2
    assert link_gpus(rows, gpus) == 0
    assert sum(len(g.processes) for g in gpus) == 3  # the pod mapping + one host link each


def test_host_of():
    assert host_of("10.0.0.5:8000") == "10.0.0.5"
    assert host_of("[::1]:8000") == "::1"
    assert host_of("Node-A") == "node-a"
    assert host_of("::1") == "::1"


def test_rank_rows_share_the_top_rows_gpus():
    gpus = gpu_records(scraped(throttled(), "10.0.0.9:9400"))
    top = inst_row("node-a:8000")
    top.ranks = [EngineRow(key=f"node-a:8000|m|{i}", target="node-a:8000", engine="vllm",
                           model="m", rank=str(i), labels=top.labels) for i in range(2)]
    link_gpus([top], gpus)
    on = gpus_by_target(gpus)
    assert all([g.index for g in on[r.target]] == [0, 1] for r in top.ranks)
    # a rank judged as a row finds the throttled GPU too
    assert [f.rule for f in diagnose([top.ranks[0]], gpus=gpus)] == ["gpu_throttle"]


# ---------------------------------------------------------------- diagnosis
def test_throttled_linked_gpu_gives_its_row_gpu_throttle_and_names_the_host():
    gpus = gpu_records(merged(scraped(throttled(), "10.0.0.9:9400"),
                              scraped(on_host(EDGE, "node-b"), "10.0.0.10:9400")))
    assert next(g for g in gpus if (g.host, g.index) == ("node-a", 0)).throttle == [
        "hw slowdown", "hw thermal slowdown"]
    rows = [inst_row("node-a:8000"), inst_row("node-b:8000")]
    link_gpus(rows, gpus)
    (f,) = diagnose(rows, gpus=gpus)
    assert (f.rule, f.target) == ("gpu_throttle", "node-a:8000")
    assert "GPU0 on node-a hw slowdown, hw thermal slowdown" in f.summary
    assert any(e.signal == "gpu0.throttle" for e in f.evidence)


def test_unlinked_throttled_gpu_gives_no_finding():
    gpus = gpu_records(scraped(throttled(), "10.0.0.9:9400"))
    rows = [inst_row("node-a:8000"), inst_row("node-a:8001")]
    link_gpus(rows, gpus)
    assert diagnose(rows, gpus=gpus) == []
    # the same GPUs linked: the finding is there (the check above can fail)
    one = [inst_row("node-a:8000")]
    link_gpus(one, gpus)
    assert [f.rule for f in diagnose(one, gpus=gpus)] == ["gpu_throttle"]


def _answers(series: dict[str, list[Series]], t: float) -> list[dict[str, object]]:
    return [{"metric": {**lab, "llmtop_name": name}, "value": [t, repr(v)]}
            for name, items in series.items() for lab, v in items]


def _engine(t: float, **labels: str) -> dict[str, object]:
    return {"metric": {**labels, "job": "vllm", "model_name": "m",
                       "llmtop_name": "vllm:num_requests_running"}, "value": [t, "3"]}


def test_fleet_refresh_links_by_pod_and_diagnoses_only_the_throttled_pod():
    t = 1_795_600_000.0
    text = gpu0_serves(throttled(), "llm", "vllm-1")
    mon = FleetMonitor(Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090")))
    plan = Plan(group=("namespace", "pod"), window_s=60.0, matchers=[], target_matchers=[])
    results = {"gauges": [_engine(t, namespace="llm", pod=p) for p in
                          ("vllm-0", "vllm-1", "vllm-2")],
               "gpus": _answers(scraped(text, "10.0.0.9:9400",
                                        target={"pod": "dcgm-x", "namespace": "gpu-op"}), t)}
    snap = mon.assemble(results, plan, t, StateInfo(), {})
    assert sorted(r.target for r in snap.engines) == ["llm/vllm-0", "llm/vllm-1", "llm/vllm-2"]
    owners = {g.index: {p.name: p.engine_target for p in g.processes} for g in snap.gpus}
    # the fixture maps GPU 1's pod on one series only: its other series carry the exporter's
    # own target pod, a consumer that is no engine row (so no link)
    assert owners == {0: {"llm/vllm-1/vllm": "llm/vllm-1"},
                      1: {"gpu-op/dcgm-x": None, "llm/vllm-0/vllm": "llm/vllm-0"}}
    mon.diagnoser.on_refresh(snap)
    got = [(f.rule, f.target) for f in mon.diagnoser.findings]
    # vllm-1's GPU 0 is throttled; vllm-0's GPU 1 is healthy; vllm-2 has no GPU
    assert got == [("gpu_throttle", "llm/vllm-1")]
    assert [p["engine_target"] for p in snap.gpus[0].to_json()["processes"]] == ["llm/vllm-1"]


def test_fleet_refresh_by_instance_links_the_one_engine_host_only():
    t = 1_795_600_000.0
    mon = FleetMonitor(Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090")))
    plan = Plan(group=("instance",), window_s=60.0, matchers=[], target_matchers=[])
    dcgm = merged(scraped(throttled(), "node-a:9400"),
                  scraped(on_host(throttled(), "node-b"), "node-b:9400"))
    results = {"gauges": [_engine(t, instance=i) for i in
                          ("node-a:8000", "node-b:8000", "node-b:8001")],
               "gpus": _answers(dcgm, t)}
    snap = mon.assemble(results, plan, t, StateInfo(), {})
    mon.diagnoser.on_refresh(snap)
    # both hosts' GPU 0 is throttled; node-b runs two engines: not knowable which is whose
    assert [(f.rule, f.target) for f in mon.diagnoser.findings] == [
        ("gpu_throttle", "node-a:8000")]


# ---------------------------------------------------------------- a real Prometheus
@pytest.fixture(scope="module")
def linked_fleet(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[tuple[str, dict[str, list[str]]]]:
    """Two demo processes scraped by a real Prometheus, their engines relabelled to the
    hosts their DCGM exporters name: ``node-a`` runs one vLLM whose GPU overheats (the
    ``gpu-throttle`` scenario after 2 s), ``node-b`` a vLLM (same scenario) and an SGLang.
    Yields the server URL and host -> engine instances."""
    from llmtop.demo.fleet import TextTarget, dcgm_text, start_prometheus, wait_scraped
    from llmtop.demo.launcher import start_demo

    started: list[Any] = []
    try:
        hosts: dict[str, list[str]] = {}
        scrape: list[dict[str, Any]] = []
        for host, engines in (("node-a", ["vllm"]), ("node-b", ["vllm", "sglang"])):
            h = start_demo(scenario="gpu-throttle", engines=engines, baseline_s=2.0)
            started.append(h)
            gpu_url = h.gpu_url
            dcgm = TextTarget(lambda u=gpu_url, n=host: dcgm_text(
                httpx.get(u, timeout=2).json()["gpus"], n))
            started.append(dcgm)
            scrape.append({"job_name": f"dcgm-{host}",
                           "static_configs": [{"targets": [dcgm.instance]}]})
            for e in h.info["engines"]:
                inst = f"{host}:{e['port']}"
                hosts.setdefault(host, []).append(inst)
                scrape.append({"job_name": f"{e['engine']}-{host}-{e['port']}",
                               "static_configs": [{"targets": [f"127.0.0.1:{e['port']}"],
                                                   "labels": {"instance": inst}}]})
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
               "scrape_configs": scrape}
        srv = start_prometheus(cfg, str(tmp_path_factory.mktemp("gpulink")),
                               binary=prometheus_bin)
        started.append(srv)
        wait_scraped(srv.url, [i for v in hosts.values() for i in v], min_samples=3)
        yield srv.url, hosts
    finally:
        for s in reversed(started):
            s.stop()


def test_real_prometheus_links_only_the_one_engine_host_and_diagnoses_it(linked_fleet):
    url, hosts = linked_fleet
    (a_engine,) = hosts["node-a"]
    deadline = time.monotonic() + 60
    while True:
        mon, snap = refresh_once(url, scrape_interval_s=1.0)
        hot = [g for g in snap.gpus if g.throttle and "hw slowdown" in g.throttle]
        if {g.host for g in hot} == {"node-a", "node-b"}:
            break
        assert time.monotonic() < deadline, [(g.host, g.throttle) for g in snap.gpus]
        time.sleep(1)
    assert sorted(r.target for r in snap.engines) == sorted(i for v in hosts.values()
                                                            for i in v)
    owners = {(g.host, g.index): sorted(filter(None, (p.engine_target for p in g.processes)))
              for g in snap.gpus}
    # node-a runs one engine: its GPU is that engine's; node-b runs two: no link at all
    assert owners == {("node-a", 0): [a_engine], ("node-b", 0): [], ("node-b", 1): []}
    throttles = [(f.target, f.summary) for f in mon.diagnoser.findings
                 if f.rule == "gpu_throttle"]
    assert [t for t, _s in throttles] == [a_engine]
    assert "GPU0 on node-a hw slowdown" in throttles[0][1]


def test_demo_fleet_engines_share_one_host_so_no_gpu_is_linked(prometheus_url, demo_fleet):
    # every demo engine listens on 127.0.0.1 and the DCGM exporters say demo-node-K: no GPU
    # host carries exactly one engine, so no GPU is any row's (the honest answer)
    assert {host_of(e.instance) for e in demo_fleet.engines} == {"127.0.0.1"}
    mon, snap = refresh_once(prometheus_url)
    assert snap.gpus and {g.host for g in snap.gpus} == {
        f"demo-node-{k}" for k in range(len(demo_fleet.gpu_urls))}
    assert len({r.target for r in snap.engines}) > 1
    assert [p for g in snap.gpus for p in g.processes if p.engine_target] == []
    assert not any(f.rule == "gpu_throttle" for f in mon.diagnoser.findings)
