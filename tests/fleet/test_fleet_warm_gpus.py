"""The warm-up asks the DCGM GPUs too (``llmtop/fleet/warm.py``, role ``gpus``): a GPU's
usual SM clock is known at the first refresh, so a power-capped GPU whose clock fell below
its usual value gets ``gpu_throttle`` at once (that rule needs the GPU's own baseline).

DCGM text: the edge fixture ``dcgm-HANDMADE-edge-mig-k8s.txt`` (GPU 0: 87 % busy, clock-event
mask 4, power cap; 71234 MiB used) plus an SM-clock series written as the dcgm-exporter
README's capture writes it (``dcgm-exporter-readme.txt``). Served by a fake Prometheus
(``test_fleet_warm.Fake``) and scraped by a real one.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import llmtop.fleet.warm as warm_mod
from llmtop.config import Config, PrometheusConfig
from llmtop.diagnose.baseline import GPU_SIGNALS
from llmtop.fleet.diagnosis import FleetDiagnosis
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.warm import WARM_GPU_FIELDS
from llmtop.parse.dcgm import _FIELDS as _DCGM_FIELDS

from .conftest import query_role
from .test_fleet_warm import DISCOVERY, SLOW, T0, Fake, _monitor
from .test_gpulink import EDGE, GPU0, on_host, scraped, throttled

METRICS = Path(__file__).parents[1] / "fixtures" / "metrics"
VLLM = (METRICS / "vllm-real-cpu-v0.32.0-under-load.txt").read_text()
USUAL, CAPPED = 1980.0, 1200.0
ROWS_ONLY = ("gauges", "counters", "buckets")
"""The warm-up's roles before it asked DCGM."""
ALL_ROLES = warm_mod.WARM_ROLES


def gpu_text(clock: float, mask: int, host: str = "node-a") -> str:
    """The edge fixture on ``host``, GPU 0's clock-event mask ``mask`` and SM clock
    ``clock`` (the README capture's ``DCGM_FI_DEV_SM_CLOCK`` family, GPU 0's labels)."""
    util = next(ln for ln in EDGE.splitlines()
                if ln.startswith("DCGM_FI_DEV_GPU_UTIL{") and GPU0 in ln)
    labels = util[util.index("{") + 1:util.rindex("}")]
    readme = (METRICS / "dcgm-exporter-readme.txt").read_text().splitlines()
    head = [ln for ln in readme if ln.startswith(("# HELP DCGM_FI_DEV_SM_CLOCK",
                                                  "# TYPE DCGM_FI_DEV_SM_CLOCK"))]
    sm = "\n".join([*head, f"DCGM_FI_DEV_SM_CLOCK{{{labels}}} {clock:g}"]) + "\n"
    return on_host(throttled(EDGE, mask) + sm, host)


class GpuFake(Fake):
    """``Fake``'s two vLLM instances and the DCGM GPUs of the slow one's host
    (``engine-2.invalid``): GPU 0 at its usual clock, power-capped from ``capped_at``."""

    def __init__(self, capped_at: float) -> None:
        super().__init__()
        self.capped_at = capped_at
        host = SLOW.rsplit(":", 1)[0]
        self.texts = {False: scraped(gpu_text(USUAL, 0, host), f"{host}:9400"),
                      True: scraped(gpu_text(CAPPED, 4, host), f"{host}:9400")}

    def series(self, role: str, t: float) -> list[tuple[dict[str, str], float]]:
        if role != "gpus":
            return super().series(role, t)
        if t < self.history_from:
            return []
        return [({**lab, "llmtop_name": name}, v)
                for name, items in self.texts[t >= self.capped_at].items() for lab, v in items]

    async def handler(self, request: httpx.Request) -> httpx.Response:
        form = dict(httpx.QueryParams(request.content.decode()))
        if query_role(form.get("query", "")) == "discovery":
            names = sorted(self.texts[False])
            found = [*DISCOVERY["data"]["result"],
                     *({"metric": {"__name__": n, "job": "dcgm"}, "value": [1, "1"]}
                       for n in names)]
            return httpx.Response(200, json={"status": "success", "data": {
                "resultType": "vector", "result": found}})
        return await super().handler(request)


def _throttle(mon: FleetMonitor) -> list[tuple[str | None, str]]:
    return [(f.target, f.summary) for f in mon.diagnoser.findings if f.rule == "gpu_throttle"]


def _first(mon: FleetMonitor) -> Any:
    async def go() -> Any:
        try:
            snap = await mon.tick()
            await mon.warmed()
            return snap
        finally:
            await mon.aclose()

    return asyncio.run(go())


def test_the_warm_up_gives_a_gpu_its_usual_clock_at_the_first_refresh():
    assert "gpus" in ALL_ROLES
    fake = GpuFake(capped_at=T0 - 30)  # capped since 30 s before llmtop was opened
    mon = _monitor(fake)
    snap = _first(mon)
    (g0,) = [g for g in snap.gpus if g.index == 0]
    assert g0.throttle == ["power cap"] and g0.sm_clock_mhz == CAPPED
    assert sorted(query_role(r["query"]) for r in fake.ranges) == [
        "buckets", "counters", "gauges", "gpus"]
    (asked,) = [r["query"] for r in fake.ranges if query_role(r["query"]) == "gpus"]
    # only the fields the GPU baseline reads (SM clock, utilisation), not all eleven
    assert set(re.findall(r"DCGM_FI_\w+", asked)) == set(WARM_GPU_FIELDS)
    assert {_DCGM_FIELDS[f][0] for f in WARM_GPU_FIELDS} == {"sm_clock_mhz", "util"}
    assert GPU_SIGNALS == ("sm_clock", "util")
    assert mon.warmup.gpus and len(mon.warmup.gpus) >= 3
    assert _throttle(mon) == [(SLOW, f"the GPU under this engine is throttled: GPU0 on "
                                     f"engine-2.invalid power cap: SM clock {CAPPED:.0f} MHz "
                                     f"vs {USUAL:.0f} usual")]
    notes = [e.text for e in mon.diagnoser.take_events() if e.target is None]
    assert any("GPUs" in n and "baseline from the server's history" in n for n in notes), notes


def test_without_dcgm_in_the_warm_up_the_gpu_has_no_usual_clock(monkeypatch):
    monkeypatch.setattr(warm_mod, "WARM_ROLES", ROWS_ONLY)  # the warm-up of before
    fake = GpuFake(capped_at=T0 - 30)
    mon = _monitor(fake)
    _first(mon)
    assert "gpus" not in {query_role(r["query"]) for r in fake.ranges}
    assert mon.diagnoser.warm_points >= 3  # the rows are warm, the GPU is not
    assert _throttle(mon) == []


def test_a_calm_gpu_gets_no_finding_from_its_history():
    fake = GpuFake(capped_at=float("inf"))  # never capped: mask 0 at its usual clock
    mon = _monitor(fake)
    _first(mon)
    assert mon.warmup.gpus and _throttle(mon) == []


# ---------------------------------------------------------------- a real Prometheus
@pytest.fixture(scope="module")
def gpu_host(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[str, dict[str, Any]]]:
    """A real Prometheus scraping, every second, a vLLM (the real capture) relabelled to
    ``node-a:8000`` and the DCGM text of ``node-a`` (``gpu_text``, its clock and mask in
    the yielded dict: change them to change what is scraped next)."""
    from llmtop.demo.fleet import TextTarget, start_prometheus, wait_scraped

    state: dict[str, Any] = {"clock": USUAL, "mask": 0}
    started: list[Any] = []
    try:
        dcgm = TextTarget(lambda: gpu_text(state["clock"], state["mask"]))
        started.append(dcgm)
        eng = TextTarget(lambda: VLLM)
        started.append(eng)
        cfg = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
               "scrape_configs": [
                   {"job_name": "dcgm", "static_configs": [
                       {"targets": [dcgm.instance], "labels": {"instance": "node-a:9400"}}]},
                   {"job_name": "vllm", "static_configs": [
                       {"targets": [eng.instance], "labels": {"instance": "node-a:8000"}}]}]}
        srv = start_prometheus(cfg, str(tmp_path_factory.mktemp("gpuwarm")),
                               binary=prometheus_bin)
        started.append(srv)
        wait_scraped(srv.url, ["node-a:8000", "node-a:9400"], min_samples=3)
        yield srv.url, state
    finally:
        for s in reversed(started):
            s.stop()


def _real_first(url: str) -> tuple[Any, FleetMonitor]:
    mon = FleetMonitor(Config(prometheus=PrometheusConfig(url=url, window_s=5.0)))
    return _first(mon), mon


def test_real_prometheus_warms_the_gpu_baseline(gpu_host, monkeypatch):
    url, state = gpu_host
    # seconds of history, not minutes: warm-up points and baseline points 2 s apart (the
    # product's 180 s and 10 s); the baseline needs 3 or more older than the 5 s window
    monkeypatch.setattr(warm_mod, "WARM_STEP_S", 2.0)
    monkeypatch.setattr(FleetDiagnosis, "baseline_step_s", 2.0)
    time.sleep(14)
    state.update(clock=CAPPED, mask=4)
    got: dict[str, tuple[Any, FleetMonitor]] = {}
    deadline = time.monotonic() + 120  # a loaded machine: each try connects afresh
    while len(got) < 2:
        for name, roles in (("dcgm", ALL_ROLES), ("rows only", ROWS_ONLY)):
            if name in got:
                continue
            monkeypatch.setattr(warm_mod, "WARM_ROLES", roles)
            snap, mon = _real_first(url)
            g0 = [g for g in snap.gpus if g.index == 0 and g.host == "node-a"]
            if g0 and g0[0].throttle == ["power cap"]:  # the capped sample is scraped
                got[name] = snap, mon
        assert time.monotonic() < deadline, f"the capped GPU was never scraped: {list(got)}"
        time.sleep(0.5)
    snap, mon = got["dcgm"]
    assert [r.target for r in snap.engines] == ["node-a:8000"]
    assert mon.warmup.error is None and len(mon.warmup.gpus) >= 3
    base = mon.diagnoser.diagnoser.tracker.gpu_baseline("node-a:0", snap.time, 5.0)
    assert base is not None and base.get("sm_clock") == USUAL
    assert _throttle(mon) == [("node-a:8000", "the GPU under this engine is throttled: GPU0 "
                               f"on node-a power cap: SM clock {CAPPED:.0f} MHz vs "
                               f"{USUAL:.0f} usual")]
    _snap, cold = got["rows only"]
    assert cold.diagnoser.warm_points >= 3 and _throttle(cold) == []
