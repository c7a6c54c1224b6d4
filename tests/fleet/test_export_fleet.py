"""``llmtop export --prometheus URL``: the fleet's rows, states and findings as the exporter's
series, equal to fleet mode's ``--once --json`` of the same refresh (a real Prometheus)."""

from __future__ import annotations

import asyncio
import time

from llmtop.cli.fleet import fleet_json
from llmtop.config import Config, PrometheusConfig
from llmtop.export.run import publish_fleet
from llmtop.export.state import ExportState
from llmtop.fleet.monitor import FleetMonitor
from tests.export.test_vs_once import rows_equal, samples


def test_fleet_export_equals_fleet_json(prometheus_url):
    async def go():
        mon = FleetMonitor(Config(prometheus=PrometheusConfig(url=prometheus_url)))
        state = ExportState("fleet", process_metrics=False)
        try:
            t0 = time.monotonic()
            snap = await mon.tick()
            publish_fleet(state, mon, snap, t0)
            return fleet_json(mon, snap), list(mon.diagnoser.findings), state.render()
        finally:
            await mon.aclose()

    doc, findings, body = asyncio.run(go())
    got = samples(body.decode())
    assert got[("llmtop_window_seconds", frozenset())] == doc["window_s"]
    assert ("llmtop_exporter_info", frozenset({("mode", "fleet"), ("version", doc["llmtop"])}))\
        in got
    compared, _ = rows_equal(doc["engines"], got)
    assert compared >= 50
    states = {r["state"] for r in doc["engines"]}
    assert "down" in states  # the dead target: a state series, not a gap
    for f in findings:
        keys = [lb for n, lb in got if n == "llmtop_finding" and dict(lb)["rule"] == f.rule
                and dict(lb)["target"] == f.target]
        assert len(keys) == 1 and dict(keys[0])["severity"] == f.severity
    assert ("llmtop_refresh_errors_total", frozenset()) in got
