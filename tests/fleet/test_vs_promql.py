"""llmtop's fleet numbers against the server's own PromQL at the same ``time``, on a real
Prometheus and a real VictoriaMetrics scraping demo engines (fixtures in ``conftest.py``).

Every row value is compared with what the server computes for the same question:
``rate`` for rates, ``histogram_quantile`` for quantiles, the gauges' own values; and the
states (``down``, ``stale``, ``restarted``) with the fleet the fixtures built.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import pytest

from llmtop.cli.fleet import run_fleet_once
from llmtop.config import Config, PrometheusConfig
from llmtop.demo.fleet import MODEL_A, MODEL_B
from llmtop.fleet.monitor import ERRORS_TTL_S, FleetMonitor
from llmtop.fleet.queries import Layouts

from .conftest import latency_params

WINDOW_S = 20.0


def _config(url: str, kind: str, **kw) -> Config:
    return Config(prometheus=PrometheusConfig(url=url, window_s=WINDOW_S,
                                              params=latency_params(kind), **kw))


def _refresh(url: str, kind: str, **kw) -> tuple[FleetMonitor, object]:
    async def go():
        mon = FleetMonitor(_config(url, kind, **kw))
        try:
            return mon, await mon.tick()
        finally:
            await mon.aclose()

    return asyncio.run(go())


def _close(a: float | None, b: float | None, rel: float = 1e-6) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def _series(promql, url: str, expr: str, t: float) -> dict[tuple[str, str], float]:
    return {(s["metric"].get("instance", ""), s["metric"].get("model_name", "")):
            float(s["value"][1]) for s in promql(url, expr, t)}


def _wait_all_up(url: str, demo_fleet, promql, timeout_s: float = 30.0) -> None:
    """Until every live target answered (its ``up`` is 1), then two more scrapes."""
    live = {e.instance for e in demo_fleet.engines if not e.down}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        up = {s["metric"]["instance"] for s in promql(url, "up == 1")}
        if live <= up:
            break
        time.sleep(0.5)
    time.sleep(2.5)


@pytest.fixture(scope="module")
def fleet(fleet_backend, demo_fleet, promql):
    _wait_all_up(fleet_backend.url, demo_fleet, promql)
    mon, snap = _refresh(fleet_backend.url, fleet_backend.kind)
    assert mon.error is None, mon.error and mon.error.message
    return fleet_backend, mon, snap


def _rows(snap, engine: str):
    return {(r.target, r.model): r for r in snap.engines
            if r.engine == engine and r.state in ("ok", "restarted")}


RATES = [
    ("vllm", "generation_tokens_per_s", "vllm:generation_tokens_total"),
    ("vllm", "prompt_tokens_per_s", "vllm:prompt_tokens_total"),
    ("vllm", "requests_per_s", "vllm:request_success_total"),
    ("vllm", "preemptions_per_s", "vllm:num_preemptions_total"),
    # SGLang's *_tokens_total move only when a request finishes: llmtop reads the per-step
    # realtime_tokens_total by mode (decode + one prefill token per finished request)
    ("sglang", "generation_tokens_per_s",
     'sglang:realtime_tokens_total{mode="decode"} + sglang:num_requests_total'),
    ("sglang", "prompt_tokens_per_s",
     'sglang:realtime_tokens_total{mode=~"prefill_compute|prefill_cache"}'),
    ("sglang", "requests_per_s", "sglang:num_requests_total"),
]


def _sum_of_rates(metrics: str, by: str = "instance, model_name") -> str:
    """``sum by (BY) (rate(X{server=""}[W])) + ...`` for each ``X{matchers}`` of ``A + B``."""
    parts = []
    for m in metrics.split(" + "):
        name, _, matchers = m.partition("{")
        sel = '{server=""' + ("," + matchers if matchers else "}")
        parts.append(f"sum by ({by}) (rate({name}{sel}[{WINDOW_S:g}s]))")
    return " + ".join(parts)


@pytest.mark.parametrize(("engine", "field", "metric"), RATES)
def test_rates_equal_the_servers_rate(fleet, promql, engine, field, metric):
    backend, _mon, snap = fleet
    rows = _rows(snap, engine)
    want = _series(promql, backend.url, _sum_of_rates(metric), snap.time)
    assert rows and want
    compared = 0
    for key, row in rows.items():
        if key in want:
            assert _close(getattr(row, field), want[key]), (backend.kind, key, field)
            compared += 1
    assert compared >= 2, (backend.kind, sorted(rows), sorted(want))


GAUGES = [
    ("vllm", "running", "sum", "vllm:num_requests_running"),
    ("vllm", "waiting", "sum", "vllm:num_requests_waiting"),
    ("vllm", "kv_cache_usage", "max", "vllm:kv_cache_usage_perc"),
    ("sglang", "running", "sum", "sglang:num_running_reqs"),
    ("sglang", "kv_cache_usage", "max", "sglang:token_usage"),
]


@pytest.mark.parametrize(("engine", "field", "agg", "metric"), GAUGES)
def test_gauges_equal_the_servers_values(fleet, promql, engine, field, agg, metric):
    backend, _mon, snap = fleet
    rows = _rows(snap, engine)
    want = _series(promql, backend.url, f'{agg} by (instance, model_name) ({metric}{{server=""}})',
                   snap.time)
    compared = 0
    for key, row in rows.items():
        if key in want:
            assert _close(getattr(row, field), want[key]), (backend.kind, key, field)
            compared += 1
    assert compared >= 2


QUANTILES = [
    ("vllm", "ttft_s", "vllm:time_to_first_token_seconds_bucket"),
    ("vllm", "itl_s", "vllm:inter_token_latency_seconds_bucket"),
    ("vllm", "e2e_s", "vllm:e2e_request_latency_seconds_bucket"),
    ("sglang", "itl_s", "sglang:inter_token_latency_seconds_bucket"),
    ("sglang", "e2e_s", "sglang:e2e_request_latency_seconds_bucket"),
]


@pytest.mark.parametrize(("engine", "field", "metric"), QUANTILES)
@pytest.mark.parametrize("q", ["p50", "p90", "p95", "p99"])
def test_quantiles_equal_histogram_quantile(fleet, promql, engine, field, metric, q):
    backend, _mon, snap = fleet
    phi = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}[q]
    rows = _rows(snap, engine)
    want = _series(promql, backend.url,
                   f'histogram_quantile({phi}, sum by (instance, model_name, le) '
                   f'(rate({metric}{{server=""}}[{WINDOW_S:g}s])))', snap.time)
    compared = 0
    for key, row in rows.items():
        qs = getattr(row, field)
        if key not in want or qs is None:
            continue
        if q in qs.below:  # llmtop shows "<bound"; PromQL interpolates from 0 inside it
            assert getattr(qs, q) >= want[key]
            continue
        assert _close(getattr(qs, q), want[key], 1e-6), (backend.kind, key, q)
        compared += 1
    assert compared >= 1, (backend.kind, engine, field, q)


def test_totals_per_model_come_from_summed_bucket_rates(fleet, promql):
    backend, mon, snap = fleet
    metric = "vllm:time_to_first_token_seconds_bucket"
    rate = f'rate({metric}{{server=""}}[{WINDOW_S:g}s])'
    for model in (MODEL_A, MODEL_B):
        total = next(r for r in mon.totals if r.model == model)
        gen = sum(_series(promql, backend.url, _sum_of_rates(m, "model_name"), snap.time
                          ).get(("", model), 0.0)
                  for m in ("vllm:generation_tokens_total", RATES[4][2]))
        assert _close(total.generation_tokens_per_s, gen, 1e-6), (backend.kind, model)
        # the model's vLLM-only quantile (one bucket layout) equals histogram_quantile of the
        # model's summed bucket rates
        vllm_only = [r for r in snap.engines if r.model == model and r.engine == "vllm"
                     and r.ttft_s is not None]
        assert vllm_only
        want = promql(backend.url, f'histogram_quantile(0.9, sum by (le) ({rate} and on '
                      f'(instance) group by (instance) (vllm:num_requests_running'
                      f'{{model_name="{model}"}})))', snap.time)
        assert want and not math.isnan(float(want[0]["value"][1]))


def test_running_total_is_the_sum_of_rows(fleet):
    backend, mon, snap = fleet
    for total in mon.totals:
        rows = [r.running for r in snap.engines if r.model == total.model and r.running]
        assert _close(total.running, sum(rows)), (backend.kind, total.model)


def test_down_target_is_a_down_row_with_the_scrape_error(fleet, demo_fleet):
    backend, _mon, snap = fleet
    dead = next(e for e in demo_fleet.engines if e.down)
    rows = [r for r in snap.engines if r.target == dead.instance]
    assert rows and all(r.state == "down" for r in rows), (backend.kind, rows)
    if backend.kind == "prometheus":  # VictoriaMetrics keeps lastError too, but formats it
        assert "connection refused" in (rows[0].error or "")
    assert rows[0].running is None and rows[0].ttft_s is None  # missing, never 0


def test_stale_target_is_stale_with_its_age(fleet, demo_fleet):
    backend, mon, snap = fleet
    stale = next(e for e in demo_fleet.engines if e.scenario == "stale")
    rows = [r for r in snap.engines if r.target == stale.instance]
    assert rows and all(r.state == "stale" for r in rows), (backend.kind, rows)
    assert rows[0].last_ok_age_s is not None and rows[0].last_ok_age_s > 2 * mon.scrape_interval_s


def test_healthy_targets_are_ok_and_the_row_set_is_the_fleet(fleet, demo_fleet):
    backend, _mon, snap = fleet
    by_target = {r.target: r for r in snap.engines}
    for e in demo_fleet.engines:
        if e.engine == "dcgm":
            continue
        assert e.instance in by_target, (backend.kind, e)
        if not e.down and e.scenario not in ("stale", "restarting") and not e.trouble:
            assert by_target[e.instance].state in ("ok", "restarted"), by_target[e.instance]
            assert by_target[e.instance].model == e.model


def test_interval_and_window_come_from_the_server(fleet):
    backend, mon, snap = fleet
    assert mon.scrape_interval_s == 1.0 and mon.interval_from == "targets"
    assert snap.window_s == WINDOW_S
    assert mon.backend is not None and mon.backend.kind == backend.kind


def test_at_evaluates_in_the_past(fleet, promql):
    # A past time at which every live target is known to be up: the module's first refresh.
    # (Six seconds before "now" raced the backend's first scrapes when this test ran first.)
    fleet_backend, _mon, first = fleet
    t_past = round(first.time, 3)
    time.sleep(max(0.0, t_past + 3.0 - time.time()))
    mon, snap = _refresh(fleet_backend.url, fleet_backend.kind, at=t_past)
    assert mon.error is None and snap.time == t_past and not mon.live
    want = _series(promql, fleet_backend.url,
                   'sum by (instance, model_name) (vllm:num_requests_running{server=""})', t_past)
    rows = _rows(snap, "vllm")
    assert rows
    for key, row in rows.items():
        if key in want:
            assert _close(row.running, want[key])


def test_once_json_has_the_fleet_fields(fleet_backend, capsys):
    cfg = _config(fleet_backend.url, fleet_backend.kind)
    rc = run_fleet_once(cfg, as_json=True)
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert doc["source"]["kind"] == fleet_backend.kind
    assert doc["source"]["url"] == fleet_backend.url.rstrip("/")
    assert doc["window_s"] == WINDOW_S and isinstance(doc["time"], float)
    assert doc["warnings"] == [] and doc["partial"] is False and doc["error"] is None
    assert {t["model"] for t in doc["totals"]} == {MODEL_A, MODEL_B}
    assert isinstance(doc["diagnosis"], list)  # the direct mode's findings, on fleet rows
    row = next(e for e in doc["engines"] if e["state"] == "ok")
    assert row["labels"]["instance"] == row["target"] and row["labels"]["job"]


def test_queries_per_refresh_do_not_depend_on_fleet_size(fleet):
    backend, mon, _snap = fleet
    assert mon.plan is not None
    n = len(mon.plan.queries())
    assert n <= 8
    # a second refresh sends exactly the plan's queries (connect work is cached)

    async def again():
        mon2 = FleetMonitor(_config(backend.url, backend.kind))
        try:
            first = await mon2.tick()
            before = mon2.client.requests
            mon2._refreshed_at = None  # allow an immediate second refresh
            await mon2.tick()
            sent = mon2.client.requests - before
            # the down target's scrape error is asked again once ERRORS_TTL_S has passed
            t0 = mon2._errors[1] if mon2._errors else 0.0
            mon2.clock = lambda: t0 + ERRORS_TTL_S + 1
            mon2._refreshed_at = None
            before = mon2.client.requests
            snap = await mon2.tick()
            down = [r for r in snap.engines if r.state == "down"]
            assert down and all(r.error for r in down)
            assert [r.error for r in down] == [r.error for r in first.engines
                                               if r.state == "down"]
            return sent, mon2.client.requests - before, len(mon2.plan.queries())
        finally:
            await mon2.aclose()

    sent, later, planned = asyncio.run(again())
    assert sent == planned  # the down target's last error is kept, not asked every refresh
    assert later >= planned + 1  # + /api/v1/targets once the error is ERRORS_TTL_S old


def test_gpus_come_from_dcgm_in_local_units(fleet, demo_fleet, promql):
    backend, _mon, snap = fleet
    hosts = {g.host for g in snap.gpus}
    assert hosts == {f"demo-node-{k}" for k in range(len(demo_fleet.gpu_urls))}
    fb = {(s["metric"]["Hostname"], s["metric"]["gpu"]): float(s["value"][1])
          for s in promql(backend.url, "DCGM_FI_DEV_FB_USED", snap.time)}
    for g in snap.gpus:
        assert g.source == "dcgm"
        assert g.util is None or 0.0 <= g.util <= 1.0  # a fraction, as NVML gives
        want = fb.get((g.host, str(g.index)))
        if want is not None:
            assert abs(g.mem_used_bytes - want * 1024 * 1024) <= 1  # MiB -> bytes


def test_history_backfill_equals_the_servers_past_values(fleet_backend, promql):
    async def go():
        mon = FleetMonitor(_config(fleet_backend.url, fleet_backend.kind, refresh_s=1.0))
        try:
            snap = await mon.tick()
            row = next(r for r in snap.engines if r.engine == "vllm" and r.state == "ok")
            return row, await mon.history(row.key, 5), mon.refresh_s
        finally:
            await mon.aclose()

    row, past, step = asyncio.run(go())
    assert 2 <= len(past) <= 5
    times = [t for t, _ in past]
    assert all(t % step == 0 for t in times)  # aligned to the step
    t, old = past[-2]
    assert old is not None and old.key == row.key
    want = _series(promql, fleet_backend.url, 'sum by (instance, model_name) '
                   '(vllm:num_requests_running{server=""})', t)
    assert _close(old.running, want[(row.target, row.model)])


def test_restarting_engine_is_restarted_within_the_window(fleet_backend, demo_fleet, promql):
    rst = next(e for e in demo_fleet.engines if e.scenario == "restart")
    deadline = time.monotonic() + 30.0  # restarts every 20 s; the window is 20 s
    states: list[str] = []
    while time.monotonic() < deadline:
        _mon, snap = _refresh(fleet_backend.url, fleet_backend.kind)
        row = next((r for r in snap.engines if r.target == rst.instance), None)
        states.append(row.state if row else "absent")
        if row is not None and row.state == "restarted":
            t = snap.time
            w = f"{WINDOW_S:g}s"
            sel = f'process_start_time_seconds{{instance="{rst.instance}"}}'
            span = promql(fleet_backend.url, f"max_over_time({sel}[{w}]) - "
                          f"min_over_time({sel}[{w}])", t)
            assert span and float(span[0]["value"][1]) > 0  # the server agrees
            assert row.error == "process_start_time_seconds changed"
            return
        time.sleep(2.0)
    raise AssertionError(f"{fleet_backend.kind}: never restarted: {states}")


def test_kv_capacity_comes_from_the_info_series_labels(fleet, promql):
    backend, _mon, snap = fleet
    info = {s["metric"]["instance"]: s["metric"] for s in
            promql(backend.url, 'vllm:cache_config_info{server=""}', snap.time)}
    compared = 0
    for (target, _model), row in _rows(snap, "vllm").items():
        m = info.get(target)
        if m and m.get("num_gpu_blocks") and m.get("block_size"):
            want = float(m.get("kv_cache_size_tokens") or
                         float(m["num_gpu_blocks"]) * float(m["block_size"]))
            assert row.kv_capacity_tokens == want, (backend.kind, target)
            compared += 1
    assert compared >= 2


def test_buckets_were_asked_below_their_count_and_give_the_whole_answers_rows(fleet):
    """On the real server, the filtered bucket query (``Plan.filtered``, zero buckets left
    out too: ``Plan.zero_cut``) was the one used, and asking every bucket instead at the
    same time gives the same quantiles."""
    backend, mon, snap = fleet
    plan = mon.plan
    for _engine, _field, metric in QUANTILES:
        assert plan.filtered(metric) and plan.zero_cut(metric), (backend.kind, metric)

    async def whole():
        m = FleetMonitor(_config(backend.url, backend.kind))
        try:
            await m.tick()
            assert "< ignoring (le) group_left ()" in (m.plan.buckets() or "")
            m.plan.layouts = Layouts()
            assert "< ignoring" not in (m.plan.buckets() or "")
            return await m._evaluate(snap.time)
        finally:
            await m.aclose()

    other = {r.key: r for r in asyncio.run(whole()).engines}
    compared = 0
    for row in snap.engines:
        o = other.get(row.key)
        if o is None or row.state not in ("ok", "restarted"):
            continue
        for attr in ("ttft_s", "itl_s", "e2e_s", "queue_s", "prompt_len"):
            a, b = getattr(row, attr), getattr(o, attr)
            if a is None or b is None:
                assert a is b, (backend.kind, row.key, attr)
                continue
            for q in ("p50", "p90", "p99", "mean"):
                assert _close(getattr(a, q), getattr(b, q), 1e-9), (backend.kind, row.key, attr, q)
                compared += 1
    assert compared >= 20, (backend.kind, compared)
