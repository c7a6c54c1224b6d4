"""Fleet mode reads the engines' FLOP/byte counters through Prometheus (``rate()`` of
``vllm:estimated_*``) and divides by the peak of the DCGM GPU the engine is linked to.

Unit level: a row's rates from the adapter's rates (a rate of 0 is "not counting", never a
measure). Against a real Prometheus: a vLLM (the real capture with ``--enable-mfu-metrics``,
its counters advancing at a known pace) relabelled to ``node-a:8000`` beside the DCGM text of
``node-a`` (an H100): llmtop's achieved rates equal the server's own ``rate()`` at the same
time, and MBU is that over the H100's 3.35 TB/s.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.rows import row_from_sample
from llmtop.model import EngineRow, ModelSample
from tests.conftest import fixture_text

from .conftest import promql
from .test_fleet_warm_gpus import USUAL, gpu_text

PACE = {"estimated_flops_per_gpu_total": 2.0e9, "estimated_read_bytes_per_gpu_total": 1.5e9,
        "estimated_write_bytes_per_gpu_total": 2.5e7}
"""Per second of wall time, what each counter of the served vLLM grows by."""


def _row(counters: dict[str, float], engine: str = "vllm") -> EngineRow:
    row = EngineRow(key="i|m", target="i", engine=engine, model="m")
    return row_from_sample(row, ModelSample("m", counters=counters), 5.0)


def test_rates_become_the_row_only_while_counting():
    row = _row({"est_flops": 2e9, "est_read_bytes": 1.5e9, "est_write_bytes": 2.5e7})
    assert (row.achieved_flops_per_s, row.achieved_read_bytes_per_s,
            row.achieved_write_bytes_per_s) == (2e9, 1.5e9, 2.5e7)
    assert row.achieved_bytes_per_s == 1.5e9 + 2.5e7 and row.mfu_hint is None
    for off in ({"est_flops": 0.0, "est_read_bytes": 0.0, "est_write_bytes": 0.0}, {}):
        row = _row(off)
        assert row.achieved_bytes_per_s is None and row.achieved_flops_per_s is None
        assert row.mfu_hint == "start vLLM with --enable-mfu-metrics"
    assert _row({}, engine="llamacpp").mfu_hint is None


def _vllm_text(t0: float) -> str:
    text = fixture_text("vllm-real-cpu-v0.32.0-mfu-b.txt")
    dt = time.time() - t0
    for name, pace in PACE.items():
        text = re.sub(rf"^(vllm:{name}\{{[^}}]*\}}) (\S+)$",
                      lambda m, p=pace: f"{m.group(1)} {float(m.group(2)) + p * dt:.1f}",
                      text, flags=re.M)
    return text


@pytest.fixture(scope="module")
def mfu_host(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus scraping, every second, the advancing vLLM as ``node-a:8000`` and
    the DCGM text of ``node-a``."""
    from llmtop.demo.fleet import TextTarget, start_prometheus, wait_scraped

    t0 = time.time()
    started: list[Any] = []
    try:
        dcgm = TextTarget(lambda: gpu_text(USUAL, 0))
        started.append(dcgm)
        eng = TextTarget(lambda: _vllm_text(t0))
        started.append(eng)
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
               "scrape_configs": [
                   {"job_name": "dcgm", "static_configs": [
                       {"targets": [dcgm.instance], "labels": {"instance": "node-a:9400"}}]},
                   {"job_name": "vllm", "static_configs": [
                       {"targets": [eng.instance], "labels": {"instance": "node-a:8000"}}]}]}
        srv = start_prometheus(cfg, str(tmp_path_factory.mktemp("mfu")), binary=prometheus_bin)
        started.append(srv)
        wait_scraped(srv.url, ["node-a:8000", "node-a:9400"], min_samples=6)
        yield srv.url
    finally:
        for s in reversed(started):
            s.stop()


def _refresh(url: str, **cfg: Any) -> Any:
    mon = FleetMonitor(Config(prometheus=PrometheusConfig(url=url, window_s=5.0), **cfg))

    async def go() -> Any:
        try:
            return await mon.tick()
        finally:
            await mon.aclose()

    return asyncio.run(go())


def test_real_prometheus_rates_and_mbu(mfu_host):
    snap = _refresh(mfu_host)
    [row] = [r for r in snap.engines if r.engine == "vllm" and r.state in ("ok", "restarted")]
    for field, name in (("achieved_flops_per_s", "estimated_flops_per_gpu_total"),
                        ("achieved_read_bytes_per_s", "estimated_read_bytes_per_gpu_total"),
                        ("achieved_write_bytes_per_s", "estimated_write_bytes_per_gpu_total")):
        [want] = promql(mfu_host, f'sum(rate(vllm:{name}{{server=""}}[5s]))', snap.time)
        assert getattr(row, field) == pytest.approx(float(want["value"][1]), rel=1e-6), field
        assert getattr(row, field) == pytest.approx(PACE[name], rel=0.2), field  # the pace
    assert row.gpu_peak and row.gpu_peak["gpu"] == "NVIDIA H100 80GB HBM3"
    assert row.mbu == pytest.approx(row.achieved_bytes_per_s / 3350e9)
    assert row.mfu == pytest.approx(row.achieved_flops_per_s / 989e12)


def test_a_models_total_has_no_per_gpu_rate():
    from llmtop.fleet.rows import model_totals
    from llmtop.model import EngineSample

    samples = [EngineSample(engine="vllm", models=[ModelSample("m", counters={
        "est_flops": 2e9, "est_read_bytes": 1.5e9, "est_write_bytes": 2.5e7})])
        for _ in range(2)]
    [total] = model_totals(samples, 5.0)
    assert total.achieved_bytes_per_s is None and total.achieved_flops_per_s is None
    assert total.mfu_hint is None and total.mbu is None
