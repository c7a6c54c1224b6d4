"""``imbalance`` on a real Prometheus scraping the demo fleet's smallest shape: one healthy
vLLM of model A beside the vLLM of model A in the ``kv-pressure`` scenario (``start_fleet(2)``,
as ``llmtop demo fleet --engines 2``). The one in trouble runs few requests (its KV is full)
and queues; the healthy one runs two to three times as many with nothing waiting. Before the
fix the healthy one was called "overloaded: 19 running vs 8 on its sibling(s)"; now it gets no
warning and the one in trouble is named overloaded, with the healthy one as its idle sibling.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Iterator

import pytest

from llmtop.cli.fleet import run_fleet_once
from llmtop.config import Config, PrometheusConfig
from llmtop.demo import fleet as demo_fleet_mod
from llmtop.fleet.monitor import FleetMonitor

pytestmark = pytest.mark.slow

WINDOW_S = 10.0
MAX_S = 90.0
"""Refresh for at most this long (the trouble starts at once: a queue within ~20 s)."""
FOOLED_MIN = 3
"""Refreshes with the shape that fooled the old rule (healthy running >= 2 x the troubled
one's and 8 above it) to see before the verdict: the test must be able to fail."""


@pytest.fixture(scope="module")
def pair(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[str, str, str]]:
    """``(url, healthy instance, troubled instance)``."""
    fl = demo_fleet_mod.start_fleet(2)
    try:
        srv = demo_fleet_mod.start_prometheus(fl.scrape_config(1.0),
                                              str(tmp_path_factory.mktemp("imbalance-prom")),
                                              binary=prometheus_bin)
        try:
            demo_fleet_mod.wait_scraped(srv.url, fl.instances, min_samples=3)
            healthy = [e.instance for e in fl.engines if not e.trouble]
            trouble = [e.instance for e in fl.engines if e.trouble]
            assert len(healthy) == len(trouble) == 1
            assert {e.model for e in fl.engines} == {demo_fleet_mod.MODEL_A}
            yield srv.url, healthy[0], trouble[0]
        finally:
            srv.stop()
    finally:
        fl.stop()


def test_the_healthy_replica_gets_no_warning_and_the_troubled_one_is_named(pair):
    url, healthy, trouble = pair
    cfg = Config(prometheus=PrometheusConfig(url=url, window_s=WINDOW_S))

    async def go():
        mon = FleetMonitor(cfg)
        seen: list[tuple[dict, list]] = []
        fooled = 0
        try:
            deadline = time.monotonic() + MAX_S
            while time.monotonic() < deadline:
                snap = await mon.tick()
                rows = {r.target: r for r in snap.engines}
                found = list(mon.diagnoser.findings)
                seen.append((rows, found))
                h, t = rows.get(healthy), rows.get(trouble)
                if h and t and h.running is not None and t.running is not None and \
                        t.waiting and h.running >= 2 * t.running and h.running - t.running >= 8:
                    fooled += 1
                named = any(f.rule == "imbalance" and f.target == trouble for f in found)
                if fooled >= FOOLED_MIN and named:
                    break
                await asyncio.sleep(1.1)
        finally:
            await mon.aclose()
        return seen, fooled

    seen, fooled = asyncio.run(go())
    last_rows = {k: (r.running, r.waiting, r.kv_cache_usage) for k, r in seen[-1][0].items()}
    assert fooled >= FOOLED_MIN, f"the demo pair never showed the shape: {last_rows}"
    bad = [(f.rule, f.severity, f.summary) for _, found in seen for f in found
           if f.target == healthy and f.severity != "info"]
    assert bad == [], f"the healthy replica was warned: {bad[:3]}"
    imb = [f for f in seen[-1][1] if f.rule == "imbalance"]
    assert [f.target for f in imb] == [trouble], (last_rows, [f.summary for f in imb])
    assert f"replica {trouble} of {demo_fleet_mod.MODEL_A} overloaded" in imb[0].summary
    assert f"while its sibling {healthy} is idle (0 waiting" in imb[0].summary


def test_once_json_names_the_troubled_replica_not_the_healthy_one(pair):
    url, healthy, trouble = pair
    out = io.StringIO()
    cfg = Config(prometheus=PrometheusConfig(url=url, window_s=WINDOW_S))
    assert run_fleet_once(cfg, as_json=True, out=out, err=io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    assert not [f for f in doc["diagnosis"] if f["target"] == healthy
                and f["severity"] != "info"], doc["diagnosis"]
    imb = [f for f in doc["diagnosis"] if f["rule"] == "imbalance"]
    assert all(f["target"] == trouble for f in imb), imb
