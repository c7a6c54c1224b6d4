"""The fleet fixtures work: real servers come up, scrape the demo fleet, answer PromQL.

These check the test infrastructure (``conftest.py``), not llmtop's fleet mode: live
targets are ``up == 1``, the dead one ``up == 0`` with its scrape error, both models and
the engine in trouble are there, the stale target's samples are old, DCGM series exist, and
the recorded Thanos/Mimir/VictoriaMetrics envelopes are well formed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from llmtop.demo.fleet import MODEL_A, MODEL_B, dcgm_text, find_binary, frozen_text, plan

from .conftest import FIXTURES, SCRAPE_INTERVAL_S, _missing


def _by_instance(series: list[dict]) -> dict[str, float]:
    return {s["metric"]["instance"]: float(s["value"][1]) for s in series}


def test_up_is_one_for_live_targets_and_zero_for_the_dead_one(fleet_backend, demo_fleet, promql):
    ups = _by_instance(promql(fleet_backend.url, "up"))
    for e in demo_fleet.engines:
        assert ups[e.instance] == (0.0 if e.down else 1.0), (fleet_backend.kind, e)
    assert sum(1 for e in demo_fleet.engines if e.down) == 1


def test_prometheus_targets_give_the_scrape_interval_and_the_down_error(prometheus_url,
                                                                         demo_fleet):
    body = httpx.get(prometheus_url + "/api/v1/targets", params={"state": "active"}).json()
    active = {t["labels"]["instance"]: t for t in body["data"]["activeTargets"]}
    assert set(active) == set(demo_fleet.instances)
    dead = next(e for e in demo_fleet.engines if e.down)
    assert active[dead.instance]["health"] == "down"
    assert "connection refused" in active[dead.instance]["lastError"]
    assert {t["scrapeInterval"] for t in active.values()} == {f"{SCRAPE_INTERVAL_S:g}s"}


def test_both_models_and_both_engines_are_scraped(fleet_backend, promql):
    for metric in ("vllm:num_requests_running", "sglang:num_running_reqs"):
        models = {s["metric"]["model_name"]
                  for s in promql(fleet_backend.url, f"count by (model_name) ({metric})")}
        assert models == {MODEL_A, MODEL_B}, (fleet_backend.kind, metric, models)


def test_the_engine_in_trouble_has_a_small_kv_pool(fleet_backend, demo_fleet, promql):
    trouble = [e.instance for e in demo_fleet.engines if e.trouble]
    assert len(trouble) == 1
    blocks = {s["metric"]["instance"]: int(s["metric"]["num_gpu_blocks"])
              for s in promql(fleet_backend.url, "vllm:cache_config_info")}
    healthy = [b for i, b in blocks.items() if i not in trouble]
    assert healthy and blocks[trouble[0]] < min(healthy)  # the kv-pressure scenario's pool


def test_the_stale_target_is_up_with_old_samples(fleet_backend, demo_fleet, promql):
    stale = next(e for e in demo_fleet.engines if e.scenario == "stale")
    now = time.time() - 2
    sel = f'vllm:num_requests_running{{instance="{stale.instance}"}}'
    ages = promql(fleet_backend.url, f"{now:.3f} - timestamp({sel})", now)
    assert ages and all(50 <= float(s["value"][1]) <= 90 for s in ages), ages
    assert _by_instance(promql(fleet_backend.url, "up"))[stale.instance] == 1.0


def test_dcgm_series_one_host_per_demo_process(fleet_backend, demo_fleet, promql):
    hosts = {s["metric"]["Hostname"]
             for s in promql(fleet_backend.url, "count by (Hostname) (DCGM_FI_DEV_GPU_UTIL)")}
    assert hosts == {f"demo-node-{k}" for k in range(len(demo_fleet.gpu_urls))}
    fb = promql(fleet_backend.url, "DCGM_FI_DEV_FB_USED")
    assert fb and all(1_000 < float(s["value"][1]) < 200_000 for s in fb)  # MiB


def test_promql_answers_at_the_given_time(fleet_backend, promql):
    t = round(time.time() - 1.5, 3)
    series = promql(fleet_backend.url, 'up{job="vllm"}', t)
    assert series and {float(s["value"][0]) for s in series} == {t}


def test_the_restarting_engine_restarts(fleet_backend, demo_fleet, promql):
    eng = next(e for e in demo_fleet.engines if e.scenario == "restart")
    expr = f'changes(process_start_time_seconds{{instance="{eng.instance}"}}[5m])'
    deadline = time.monotonic() + 40
    while True:
        got = promql(fleet_backend.url, expr)
        if got and float(got[0]["value"][1]) >= 1:
            break
        assert time.monotonic() < deadline, (fleet_backend.kind, got)
        time.sleep(1)


# -- plain helpers, no servers --------------------------------------------------------------

def test_plan_has_two_models_and_one_engine_in_trouble():
    groups = plan(8)
    assert sum(len(g.engines) for g in groups) == 8
    assert {g.model for g in groups} == {MODEL_A, MODEL_B}
    assert [g.scenario for g in groups].count("kv-pressure") == 1
    kinds = [k for g in groups for k in g.engines]
    assert kinds.count("vllm") >= 2 and kinds.count("sglang") >= 2


def test_frozen_text_stamps_samples_only():
    out = frozen_text("# HELP a x\n# TYPE a gauge\na{b=\"1\"} 3\n\n", 60, now=1000.0)
    assert out.splitlines() == ["# HELP a x", "# TYPE a gauge", 'a{b="1"} 3 940000', ""]


def test_dcgm_text_units_and_unique_uuids():
    g = {"index": 0, "uuid": "GPU-x", "name": "H100", "util": 0.5, "mem_used_bytes": 2 * 1048576,
         "power_w": 300.0, "energy_j": 2.0, "throttle": ["power cap"]}
    a, b = dcgm_text([g], "node-a"), dcgm_text([g], "node-b")

    def values(text: str) -> dict[str, str]:
        return {ln.split("{")[0]: ln.rsplit(" ", 1)[1] for ln in text.splitlines()
                if ln and not ln.startswith("#")}

    assert values(a) == {"DCGM_FI_DEV_GPU_UTIL": "50", "DCGM_FI_DEV_FB_USED": "2",  # %, MiB
                         "DCGM_FI_DEV_POWER_USAGE": "300",
                         "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "2000",  # mJ
                         "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "4"}  # absent stays absent
    assert 'Hostname="node-a"' in a and 'gpu="0"' in a and 'device="nvidia0"' in a

    def uuid(text: str) -> str:
        return text.split('UUID="')[1].split('"')[0]

    assert uuid(a) != uuid(b)


# -- recorded Thanos / Mimir / VictoriaMetrics envelopes -----------------------------------

@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_recorded_envelopes_are_well_formed(path):
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert next(iter(doc)) == "source" and len(doc["source"]) > 40
    assert doc["request"]["path"].endswith(("/api/v1/query", "/api/v1/query_range",
                                            "/api/v1/targets", "/api/v1/status/buildinfo"))
    resp = doc["response"]
    if resp["headers"].get("content-type", "").startswith("application/json"):
        assert resp["body"]["status"] == ("success" if resp["status"] == 200 else "error")
    else:
        assert isinstance(resp["body"], str) and resp["status"] >= 400


def test_the_backend_quirks_the_fixtures_document():
    def load(name: str) -> dict:
        return json.loads((FIXTURES / name).read_text(encoding="utf-8"))

    thanos = load("thanos-query-partial-warnings.json")
    assert thanos["response"]["body"]["warnings"]
    assert thanos["request"]["params"]["dedup"] == "true"
    doubled = load("thanos-query-dedup-false.json")["response"]["body"]["data"]["result"]
    assert len({s["metric"]["instance"] for s in doubled}) * 2 == len(doubled)
    assert load("victoriametrics-cluster-query-partial.json")["response"]["body"]["isPartial"]
    mimir = load("mimir-query-vector.json")
    assert mimir["request"]["path"].startswith("/prometheus/")
    assert mimir["request"]["headers"]["X-Scope-OrgID"]
    assert load("mimir-query-no-org-id.json")["response"]["status"] == 401
    vm_bad = load("victoriametrics-1.79-query-bad.json")["response"]
    assert (vm_bad["status"], vm_bad["body"]["errorType"]) == (422, "422")
    prom_bad = load("prometheus-2.42-query-bad.json")["response"]
    assert (prom_bad["status"], prom_bad["body"]["errorType"]) == (400, "bad_data")
    vm_targets = load("victoriametrics-1.79-targets.json")["response"]["body"]["data"]
    assert all("scrapeInterval" not in t and t["discoveredLabels"]["__scrape_interval__"] == "1s"
               for t in vm_targets["activeTargets"])


# -- llmtop demo fleet --------------------------------------------------------------------

def _no_fetch(*_a, **_k):
    raise AssertionError("fetched without consent")


def test_demo_fleet_without_a_binary_says_how_to_get_one(monkeypatch, capsys):
    # not a terminal, no --yes: nothing is fetched; one exact command is given
    from llmtop.cli.demo import main as demo_main
    from llmtop.demo import fleet, fleet_bins

    monkeypatch.setattr(fleet, "find_binary", lambda name: None)
    monkeypatch.setattr(fleet_bins, "fetch", _no_fetch)
    monkeypatch.setattr(fleet_bins, "blocker", lambda: None)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a TTY: never read
    assert demo_main(["fleet", "--once", "--json"]) == 2
    err = capsys.readouterr().err
    assert "no prometheus binary" in err and "llmtop demo fleet --yes" in err
    assert "apt-get install prometheus" in err and "scripts/" not in err


def test_demo_fleet_yes_fetches_into_the_cache_then_runs(monkeypatch, capsys, tmp_path):
    from llmtop.cli.demo import main as demo_main
    from llmtop.demo import fleet, fleet_bins

    fetched: list[str] = []
    monkeypatch.setenv("LLMTOP_FLEET_BIN_DIR", str(tmp_path))
    monkeypatch.setattr(fleet, "find_binary", lambda name: (str(tmp_path / name)
                                                            if fetched else None))
    monkeypatch.setattr(fleet_bins, "blocker", lambda: None)
    monkeypatch.setattr(fleet_bins, "fetch", lambda dest, progress: fetched.append(dest))
    started: list[str] = []

    def fake_start(*_a, **_k):
        started.append("fleet")
        raise fleet.LlmtopError("stop here")

    monkeypatch.setattr(fleet, "start_demo_fleet", fake_start)
    assert demo_main(["fleet", "--yes", "--once"]) == 2
    assert fetched == [str(tmp_path)] and started == ["fleet"]


def test_demo_fleet_where_nothing_can_be_fetched(monkeypatch, capsys):
    from llmtop.cli.demo import main as demo_main
    from llmtop.demo import fleet, fleet_bins

    monkeypatch.setattr(fleet, "find_binary", lambda name: None)
    monkeypatch.setattr(fleet_bins, "fetch", _no_fetch)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert fleet_bins.blocker() and "apt-get" in fleet_bins.blocker()
    assert demo_main(["fleet", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "cannot fetch one here" in err and "LLMTOP_PROMETHEUS_BIN" in err


@pytest.mark.slow
def test_fleet_bins_fetch_unpacks_real_binaries(tmp_path):
    # the path `llmtop demo fleet --yes` takes, for real (Debian's packages)
    from llmtop.demo import fleet_bins

    why = fleet_bins.blocker()
    if why:
        pytest.skip(why)
    lines: list[str] = []
    dest = fleet_bins.fetch(str(tmp_path / "bins"), progress=lines.append)
    assert fleet_bins.have_all(dest)
    out = subprocess.run([f"{dest}/prometheus", "--version"], capture_output=True, text=True,
                         timeout=30)
    assert "prometheus, version" in (out.stdout + out.stderr)
    assert lines[0].startswith("fetching Debian's prometheus") and lines[-1].startswith("done")
    before = len(lines)
    assert fleet_bins.fetch(dest, progress=lines.append) == dest  # cached: no second fetch
    assert len(lines) == before


def test_demo_fleet_passes_once_json_through(prometheus_bin):
    # prometheus_bin: only to skip (or fail in CI) without the binary; this starts its own.
    out = subprocess.run([sys.executable, "-m", "llmtop", "demo", "fleet", "--engines", "3",
                          "--scrape-interval", "1", "--once", "--json"], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert "llmtop demo fleet: prometheus at http://127.0.0.1:" in out.stderr, out.stderr
    doc = json.loads(out.stdout)
    assert doc["source"]["kind"] == "prometheus"
    assert doc["source"]["url"].startswith("http://127.0.0.1:")


# -- examples/llmtop-rules.yaml ------------------------------------------------------------

def test_recording_rules_pass_promtool():
    promtool = find_binary("promtool")
    if not promtool:
        _missing("promtool")
    rules = Path(__file__).parents[2] / "examples" / "llmtop-rules.yaml"
    check = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS: 31 rules found" in check.stdout
    test = subprocess.run([promtool, "test", "rules", str(FIXTURES / "llmtop-rules.test.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert test.returncode == 0, test.stdout + test.stderr
