"""A scenario's anomaly can end (``LLMTOP_DEMO_ANOMALY_S``): the baseline's traffic returns and
the effect is undone; ``kv-pressure`` honours a baseline (and starts at once without one)."""

from __future__ import annotations

import asyncio

from llmtop.demo.scenarios import ANOMALY_ENV, anomaly_seconds, get_scenario


async def _until(cond, limit_s: float = 5.0) -> None:
    for _ in range(int(limit_s / 0.05)):
        if cond():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_anomaly_ends(demo_factory):
    s = await demo_factory(("vllm",), scenario="errors", background=True, baseline_s=0.2,
                           anomaly_s=0.4)
    e = s.sites[0].engine
    assert e.error_share == 0.0 and s.anomaly_started is None
    await _until(lambda: s.anomaly_started is not None)
    assert e.error_share > 0 and s.traffic is not None and s.traffic.anomaly
    await _until(lambda: s.anomaly_ended is not None)
    assert e.error_share == 0.0 and not s.traffic.anomaly
    assert s.info()["anomaly_s"] == 0.4


async def test_kv_pressure_baseline_then_pressure(demo_factory, monkeypatch):
    monkeypatch.delenv("LLMTOP_DEMO_BASELINE_S", raising=False)
    now = await demo_factory(("vllm",), scenario="kv-pressure", background=True)
    await _until(lambda: now.anomaly_started is not None, 2.0)  # no baseline: at once
    later = await demo_factory(("vllm",), scenario="kv-pressure", background=True,
                               baseline_s=30.0)
    await asyncio.sleep(0.3)
    assert later.anomaly_started is None and later.traffic is not None
    assert not later.traffic.anomaly
    sc = get_scenario("kv-pressure")
    assert sc.shape("vllm").base < sc.shape("vllm", anomaly=True).base  # light, then heavy


def test_anomaly_seconds(monkeypatch):
    monkeypatch.delenv(ANOMALY_ENV, raising=False)
    assert anomaly_seconds() is None and anomaly_seconds(3) == 3.0
    monkeypatch.setenv(ANOMALY_ENV, "12.5")
    assert anomaly_seconds() == 12.5
    monkeypatch.setenv(ANOMALY_ENV, "soon")
    assert anomaly_seconds() is None
