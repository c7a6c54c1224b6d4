"""Fleet GPUs carry DCGM's profiling fields as the named activity fields (``fleet/rows.py``
``gpu_records`` through the DCGM adapter), per GPU and per MIG instance, from series as a
Prometheus server stores them and through a real Prometheus.

DCGM text: ``dcgm-HANDMADE-prof-activity.txt`` (field names from dcgm-exporter's
``dcp-metrics-included.csv``; GPU 0 whole-GPU activity, GPU 1 two MIG instances).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.queries import DUP_LABELS, Plan
from llmtop.fleet.rows import gpu_records
from llmtop.model import GpuRecord

from .test_gpulink import scraped

METRICS = Path(__file__).parents[1] / "fixtures" / "metrics"
PROF = (METRICS / "dcgm-HANDMADE-prof-activity.txt").read_text()
VLLM = (METRICS / "vllm-real-cpu-v0.32.0-under-load.txt").read_text()


def _check(gpus: list[GpuRecord]) -> None:
    by = {(g.host, g.index): g for g in gpus}
    g0, g1 = by[("node-b", 0)], by[("node-b", 1)]
    assert g0.activity_source == "dcgm"
    assert (g0.sm_active, g0.sm_occupancy, g0.tensor_active, g0.dram_active,
            g0.fp16_active) == (0.23, 0.11, 0.07, 0.81, 0.02)
    assert g0.nvlink_tx_bytes_s == 21474836480.0 and g0.nvlink_rx_bytes_s is None
    assert g0.pcie_tx_bytes_s == 52428800.0 and g0.pcie_rx_bytes_s == 1048576.0
    assert "tensor_active" not in g0.extra and g0.extra["gr_engine_active"] == 0.99
    assert g1.sm_active is None  # no whole-GPU series: an instance's is not the GPU's
    assert g1.mig_activity["1"] == {"sm_active": 0.6, "tensor_active": 0.3, "dram_active": 0.4}
    assert g1.mig_activity["2"] == {"sm_active": 0.05, "dram_active": None}


def test_prometheus_series_map_to_the_named_fields():
    _check(gpu_records(scraped(PROF, "node-b:9400")))


def test_the_gpus_query_asks_every_discovered_dcgm_field():
    names = {n: "dcgm" for n in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE",
                                 "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_NVLINK_TX_BYTES")}
    q = Plan(group=("instance",), window_s=60.0, matchers=[], target_matchers=[],
             names=names).gpus()
    assert q is not None
    for n in names:  # each field as it is stored, less only the copies of one value
        assert f"max without ({', '.join(DUP_LABELS)}) ({n}{{}})" in q
    assert "GPU_I_ID" not in q  # MIG instances stay apart: their label is never summed away


# ---------------------------------------------------------------- a real Prometheus
@pytest.fixture(scope="module")
def prof_host(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus scraping, every second, the profiling fixture (as ``node-b:9400``)
    and a vLLM (the real capture, as ``node-b:8000``)."""
    from llmtop.demo.fleet import TextTarget, start_prometheus, wait_scraped

    started: list[Any] = []
    try:
        dcgm = TextTarget(lambda: PROF)
        started.append(dcgm)
        eng = TextTarget(lambda: VLLM)
        started.append(eng)
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
               "scrape_configs": [
                   {"job_name": "dcgm", "static_configs": [
                       {"targets": [dcgm.instance], "labels": {"instance": "node-b:9400"}}]},
                   {"job_name": "vllm", "static_configs": [
                       {"targets": [eng.instance], "labels": {"instance": "node-b:8000"}}]}]}
        srv = start_prometheus(cfg, str(tmp_path_factory.mktemp("gpuprof")),
                               binary=prometheus_bin)
        started.append(srv)
        wait_scraped(srv.url, ["node-b:8000", "node-b:9400"], min_samples=2)
        yield srv.url
    finally:
        for s in reversed(started):
            s.stop()


def test_real_prometheus_gives_fleet_gpus_their_activity(prof_host):
    async def go() -> Any:
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url=prof_host, window_s=5.0)))
        try:
            return await mon.tick()
        finally:
            await mon.aclose()

    deadline = time.monotonic() + 60
    while True:
        snap = asyncio.run(go())
        if len(snap.gpus) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    _check(snap.gpus)
