"""Fleet mode on a real Prometheus scraping the demo fleet: headroom per instance (profiles
matched by the ``instance`` address) and per model (the model's summed rate over its
instances' summed capacity, only when every instance that is up has one)."""

from __future__ import annotations

import io
import json
import time

import pytest

from llmtop.capacity import Profile, save_profile
from llmtop.cli.fleet import run_fleet_once
from llmtop.config import Config, PrometheusConfig


def test_fleet_headroom_per_instance_and_per_model(prometheus_url, demo_fleet, tmp_path,
                                                   monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    caps = {}
    profiled = demo_fleet.engines[0].model
    for i, e in enumerate(demo_fleet.engines):
        if e.model != profiled:
            continue  # the other model keeps no profile: its rows and total say –
        caps[e.instance] = 5.0 + i
        save_profile(Profile(url=f"http://{e.instance}", requests_per_s=caps[e.instance],
                             output_tokens_per_s=None, measured_unix=time.time() - 60,
                             model=e.model, engine=e.engine, slo={"ttft": 0.5}))
    cfg = Config(prometheus=PrometheusConfig(url=prometheus_url, window_s=10.0))
    out = io.StringIO()
    assert run_fleet_once(cfg, as_json=True, out=out, err=io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    rows = [r for r in doc["engines"] if r["state"] in ("ok", "restarted")]
    seen = 0
    for r in rows:
        if r["target"] in caps and r["requests_per_s"] is not None:
            assert r["capacity_used"] == pytest.approx(r["requests_per_s"] / caps[r["target"]])
            seen += 1
        elif r["model"] != profiled:
            assert r["capacity_used"] is None and r["capacity"] is None
    assert seen >= 1, rows
    total = next(t for t in doc["totals"] if t["model"] == profiled)
    up = [r for r in rows if r["model"] == profiled]
    assert total["requests_per_s"] is not None and all(r["target"] in caps for r in up)
    want = total["requests_per_s"] / sum(caps[r["target"]] for r in up)
    assert total["capacity_used"] == pytest.approx(want)
    assert total["capacity"]["instances"] == len(up)
    other = [t for t in doc["totals"] if t["model"] != profiled]
    assert all(t["capacity_used"] is None for t in other)
