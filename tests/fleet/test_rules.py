"""Fleet mode reads ``examples/llmtop-rules.yaml``'s recording rules when they exist with its
window: a real Prometheus evaluating those rules (every second here) over the demo fleet."""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

import pytest

from llmtop.demo import fleet as demo_fleet_mod
from llmtop.fleet.queries import Plan, rule_names

from .conftest import refresh_once

RULES = Path(__file__).resolve().parents[2] / "examples" / "llmtop-rules.yaml"


def test_rule_names_need_the_same_window_and_labels():
    present = {"llmtop:vllm_generation_tokens_total:rate2m",
               "llmtop:vllm_time_to_first_token_seconds_bucket:rate2m"}
    names = ["vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket",
             "vllm:prompt_tokens_total"]
    got = rule_names(present, names, 120.0, ["instance"])
    assert got == {"vllm:generation_tokens_total": "llmtop:vllm_generation_tokens_total:rate2m",
                   "vllm:time_to_first_token_seconds_bucket":
                   "llmtop:vllm_time_to_first_token_seconds_bucket:rate2m"}
    assert rule_names(present, names, 60.0, ["instance"]) == {}  # another window
    assert rule_names(present, names, 120.0, ["instance", "container"]) == {}  # label dropped
    plan = Plan(group=("instance",), window_s=120.0, matchers=['server=""'],
                target_matchers=[], names={n: "counter" for n in names[:1]}, rules=got)
    q = plan.queries()["counters"]
    assert "llmtop:vllm_generation_tokens_total:rate2m{server=\"\"}" in q and "rate(" not in q


@pytest.fixture(scope="module")
def rules_prom(demo_fleet):
    if demo_fleet_mod.find_binary("prometheus") is None:
        pytest.skip("no prometheus binary: " + demo_fleet_mod.INSTALL_HINT)
    work = Path(tempfile.mkdtemp(prefix="llmtop-rules-"))
    rules = re.sub(r"interval: \d+s", "interval: 1s", RULES.read_text())
    (work / "rules.yaml").write_text(rules)
    cfg = demo_fleet.scrape_config(1.0)
    cfg["rule_files"] = [str(work / "rules.yaml")]
    (work / "prometheus.yml").write_text(json.dumps(cfg))
    srv = demo_fleet_mod.start_prometheus(str(work / "prometheus.yml"), str(work))
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = demo_fleet_mod.query(srv.url, "count(llmtop:vllm_generation_tokens_total:rate2m)")
            if got["data"]["result"]:
                break
            time.sleep(0.5)
        time.sleep(2.0)
        yield srv.url
    finally:
        srv.stop()


def test_rules_serve_the_rates_with_the_same_numbers(rules_prom, promql):
    mon, snap = refresh_once(rules_prom, window_s=120.0)
    assert mon.error is None and mon.plan is not None
    assert mon.plan.rules.get("vllm:generation_tokens_total") == \
        "llmtop:vllm_generation_tokens_total:rate2m"
    want = {s["metric"]["instance"]: float(s["value"][1]) for s in promql(
        rules_prom, 'sum by (instance) (llmtop:vllm_generation_tokens_total:rate2m)', snap.time)}
    rows = [r for r in snap.engines if r.engine == "vllm" and r.state != "down"
            and r.target in want]
    assert len(rows) >= 2
    for r in rows:
        assert r.generation_tokens_per_s == pytest.approx(want[r.target], rel=1e-9)
        assert r.ttft_s is not None  # quantiles from the recorded bucket rates
