"""The example alerting rules on a real Prometheus scraping ``llmtop export`` every second.

The demo's ``kv-pressure`` scenario runs a light-load baseline, then the pressure, then the
baseline again (``LLMTOP_DEMO_BASELINE_S``/``LLMTOP_DEMO_ANOMALY_S``). Meanwhile the test asks
``llmtop --once --json`` and Prometheus' ``/api/v1/alerts`` in turn: no alert in the healthy
phase; ``LlmtopFinding`` firing, labelled with the finding's rule, target and severity,
within a few scrape intervals of the finding showing in ``--once``; resolved after the end.

The demo, the exporter and ``--once`` run on a clock ``TIME_SCALE`` times as fast as the wall
clock (``llmtop.clock``), and Prometheus scrapes and evaluates ``TIME_SCALE`` times a second:
every duration below is in that clock's seconds, the same timeline in a quarter of the time.
The rules file is the shipped one, unchanged (``LlmtopFinding`` has no ``for:``).
"""

from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from llmtop import clock
from llmtop.config import Config
from llmtop.demo.fleet import start_prometheus
from llmtop.demo.launcher import start_demo
from llmtop.once import run_once
from tests.export.conftest import need_binary

ALERTS = Path(__file__).resolve().parents[2] / "examples" / "llmtop-alerts.yaml"
TIME_SCALE = 4.0
BASELINE_S = 25.0
ANOMALY_S = 25.0
RESOLVE_S = 90.0
"""After the anomaly: the queue drains, the 30 s window forgets, the 15 s hold ends."""
FEW_SCRAPES_S = 6.0
"""Alert after the finding shows in --once: a scrape (1 s), an evaluation (1 s), --once's own
1 s window and the loop's turn."""


def test_promtool_checks_the_alerts():
    promtool = need_binary("promtool")
    out = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 4 rules found" in out.stdout
    test = Path(__file__).parent / "fixtures" / "llmtop-alerts.test.yaml"
    out = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def _once(target: str) -> list[dict]:
    from llmtop.targets import parse_target

    buf = io.StringIO()
    cfg = Config(targets=(parse_target(target),), discover=False)
    run_once(cfg, window_s=1.0, as_json=True, out=buf, err=io.StringIO())
    return json.loads(buf.getvalue())["diagnosis"]


def _alerts(url: str) -> list[dict]:
    body = httpx.get(url + "/api/v1/alerts", timeout=5).json()
    return [a for a in body["data"]["alerts"] if a["labels"].get("alertname") == "LlmtopFinding"]


@pytest.mark.slow
@pytest.mark.ci_step  # a real Prometheus and ~35 s of real time
def test_kv_pressure_pages_and_resolves(tmp_path, exporter_factory, monkeypatch):
    need_binary("prometheus")
    monkeypatch.setenv(clock.ENV, clock.env_value(TIME_SCALE))
    every = f"{1000 / TIME_SCALE:.0f}ms"  # one clock second
    demo = start_demo(scenario="kv-pressure", engines=["vllm"], baseline_s=BASELINE_S,
                      anomaly_s=ANOMALY_S)
    t0 = clock.monotonic()
    srv = None
    try:
        t = demo.targets[0]
        target = f"vllm@127.0.0.1:{t.port}"
        exp = exporter_factory([target, "--interval", "1"])
        srv = start_prometheus({
            "global": {"scrape_interval": every, "evaluation_interval": every},
            "rule_files": [str(ALERTS)],
            "scrape_configs": [{"job_name": "llmtop",
                                "static_configs": [{"targets": [exp.hostport]}]}],
        }, str(tmp_path / "prom"))
        healthy_alerts: list[dict] = []
        t_once = t_alert = t_resolved = None
        fired: dict | None = None
        while (now := clock.monotonic() - t0) < BASELINE_S + ANOMALY_S + RESOLVE_S:
            found = [f for f in _once(target) if f["rule"] == "kv_pressure"
                     and f["severity"] in ("warn", "critical")]
            alerts = _alerts(srv.url)
            now = clock.monotonic() - t0
            if now < BASELINE_S - 1:
                healthy_alerts += alerts
            if found and t_once is None:
                t_once = now
            firing = [a for a in alerts if a["state"] == "firing"]
            if firing and t_alert is None:
                t_alert, fired = now, firing[0]
            if t_alert is not None and now > BASELINE_S + ANOMALY_S and not alerts:
                t_resolved = now
                break
            time.sleep(max(0.0, 1.0 - (clock.monotonic() - t0 - now)) / TIME_SCALE)
        print(f"finding in --once at {t_once} s, alert firing at {t_alert} s, resolved at "
              f"{t_resolved} s (anomaly {BASELINE_S:g}-{BASELINE_S + ANOMALY_S:g} s)")
        assert healthy_alerts == [], f"alert during the healthy phase: {healthy_alerts}"
        assert t_once is not None and t_once >= BASELINE_S - 1, t_once
        assert t_alert is not None and fired is not None, "the alert never fired"
        assert t_alert <= t_once + FEW_SCRAPES_S, (t_once, t_alert)
        labels = fired["labels"]
        assert labels["rule"] == "kv_pressure" and labels["target"] == target
        assert labels["severity"] in ("warn", "critical") and labels["engine"] == "vllm"
        assert labels["summary"].startswith("KV cache")
        assert labels["summary"] in fired["annotations"]["summary"]
        assert "kv=" in fired["annotations"]["description"]  # the evidence, by query
        assert t_resolved is not None, "the alert did not resolve after the scenario ended"
    finally:
        if srv is not None:
            srv.stop()
        demo.stop()
