"""Fleet mode's live diagnosis (``llmtop/fleet/diagnosis.py``): a ``FleetMonitor`` fed by a
fake Prometheus (``httpx.MockTransport``) whose answers are built per refresh from a scenario:
two vLLM instances of one model, 2 requests/s each; from refresh ``QUEUE_FROM`` on, the second
one queues (waiting 6, 8, 10..., queue time ~2.5 s of a ~3 s TTFT). The clock is the test's:
one refresh every 10 s, the fleet's default 60 s window.
"""

from __future__ import annotations

import asyncio
import itertools
import math

import httpx

from llmtop.cli.fleet import tui_config
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.diagnosis import FleetDiagnosis, warm_times
from llmtop.fleet.monitor import FleetMonitor
from llmtop.model import EngineRow, Quantiles, Snapshot

from .conftest import query_role

T0 = 1_795_600_000.0
STEP_S = 10.0
QUEUE_FROM = 12
"""Refresh index where engine-2 starts to queue (after 110 s of healthy refreshes)."""
HEALTHY, QUEUED = "engine-1.invalid:8000", "engine-2.invalid:8000"
LE = ("0.05", "0.1", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")
REQ_S = 2.0

NAMES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:generation_tokens_total", "vllm:prompt_tokens_total",
         "vllm:request_success_total",
         "vllm:request_queue_time_seconds_bucket", "vllm:request_queue_time_seconds_sum",
         "vllm:request_queue_time_seconds_count",
         "vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds_sum",
         "vllm:time_to_first_token_seconds_count"]
DISCOVERY = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": n, "job": "vllm"}, "value": [1, "1"]} for n in NAMES]}}


def _state(instance: str, n: int, queue_from: int = QUEUE_FROM) -> dict[str, object]:
    """What one instance reports at refresh ``n``: gauges, rates, bucket rates."""
    queued = instance == QUEUED and n >= queue_from
    if queued:  # ~2.5 s queue, ~3 s TTFT: admission-bound
        q = (0, 0, 0, 0.2, 1.0, 2.0, 2.0, 2.0)
        ttft = (0, 0, 0, 0, 0.4, 2.0, 2.0, 2.0)
        q_sum, ttft_sum = REQ_S * 2.5, REQ_S * 3.0
        waiting = 6.0 + 2 * max(0, n - queue_from)
    else:
        q = (2.0,) * 8
        ttft = (0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)
        q_sum, ttft_sum = REQ_S * 0.01, REQ_S * 0.08
        waiting = 0.0
    return {
        "gauges": {"vllm:num_requests_running": 16.0, "vllm:num_requests_waiting": waiting,
                   "vllm:kv_cache_usage_perc": 0.4},
        "counters": {"vllm:generation_tokens_total": 400.0, "vllm:prompt_tokens_total": 800.0,
                     "vllm:request_success_total": REQ_S,
                     "vllm:request_queue_time_seconds_sum": q_sum,
                     "vllm:request_queue_time_seconds_count": REQ_S,
                     "vllm:time_to_first_token_seconds_sum": ttft_sum,
                     "vllm:time_to_first_token_seconds_count": REQ_S},
        "buckets": {"vllm:request_queue_time_seconds_bucket": q,
                    "vllm:time_to_first_token_seconds_bucket": ttft},
    }


def _vector(items: list[tuple[dict[str, str], float]], t: float) -> httpx.Response:
    result = [{"metric": m, "value": [t, repr(v)]} for m, v in items]
    return httpx.Response(200, json={"status": "success",
                                     "data": {"resultType": "vector", "result": result}})


class FakeFleet:
    """A fake Prometheus answering from ``_state`` at each query's ``time``."""

    def __init__(self) -> None:
        self.clock = T0
        self.queue_from = QUEUE_FROM

    def n(self, t: float) -> int:
        return round((t - T0) / STEP_S)

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/api/v1/status/buildinfo"):
            return httpx.Response(200, json={"status": "success", "data": {"version": "2.42.0"}})
        if path.endswith(("/api/v1/targets", "/api/v1/label/__name__/values")):
            return httpx.Response(404, text="404 page not found")
        if path.endswith("/api/v1/metadata"):
            return httpx.Response(200, json={"status": "success", "data": {}})
        form = dict(httpx.QueryParams(request.content.decode()))
        q, t = form.get("query", ""), float(form.get("time", self.clock))
        role = query_role(q)
        if role == "discovery":
            return httpx.Response(200, json=DISCOVERY)
        items: list[tuple[dict[str, str], float]] = []
        for inst in (HEALTHY, QUEUED):
            base = {"instance": inst, "job": "vllm", "model_name": "m"}
            if role == "state":
                items += [({**base, "llmtop_name": "inventory:vllm"}, 1.0),
                          ({**base, "llmtop_name": "last_ts:vllm"}, t - 1),
                          ({"instance": inst, "job": "vllm", "llmtop_name": "up"}, 1.0)]
                continue
            for name, v in _state(inst, self.n(t), self.queue_from)[role].items():
                if role == "buckets":
                    items += [({**base, "llmtop_name": name, "le": le}, b)
                              for le, b in zip(LE, v, strict=True)]
                else:
                    items.append(({**base, "llmtop_name": name}, v))
        return _vector(items, t)


def _monitor(fake: FakeFleet, **kw: object) -> FleetMonitor:
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", scrape_interval_s=10.0,
                                             **kw))
    return FleetMonitor(cfg, transport=httpx.MockTransport(fake.handler),
                        clock=lambda: fake.clock)


async def _refreshes(mon: FleetMonitor, fake: FakeFleet, count: int) -> list[Snapshot]:
    out = []
    for _ in range(count):
        out.append(await mon.tick())
        fake.clock += STEP_S
    return out


def _run(mon: FleetMonitor, fake: FakeFleet, count: int) -> list[Snapshot]:
    return asyncio.run(_refreshes(mon, fake, count))


def _queueing(mon: FleetMonitor) -> list:
    return [f for f in mon.diagnoser.findings if f.rule == "queueing"]


def test_a_healthy_fleet_has_no_finding():
    fake = FakeFleet()
    mon = _monitor(fake)
    snaps = _run(mon, fake, QUEUE_FROM)  # all healthy: the anomaly is not reached
    assert len(snaps[-1].engines) == 2 and all(r.state == "ok" for r in snaps[-1].engines)
    assert snaps[-1].engines[0].queue_s is not None  # the rules had numbers to judge
    assert mon.diagnoser.refreshes == QUEUE_FROM
    assert mon.diagnoser.findings == []
    # no finding line (this fake holds no history: the warm-up's own note says so)
    assert [e for e in mon.diagnoser.take_events() if e.target is not None] == []


def test_the_queueing_instance_is_named_with_its_baseline():
    fake = FakeFleet()
    mon = _monitor(fake)
    _run(mon, fake, QUEUE_FROM + 1)
    # queueing from this refresh on, not yet all window long; the queue-time histograms name
    # it already (issue 34: a queue in bursts, or building up)
    for more in (0, 5):  # and 50 s into the queue: the 60 s window still holds a waiting 0
        _run(mon, fake, more)
        (early,) = _queueing(mon)
        assert "or is building up" in early.summary
        ev0 = {e.signal: e.value for e in early.evidence}
        assert ev0["waiting_min"] == 0, "waiting_min must hold the window's healthy refreshes"
    _run(mon, fake, 2)
    found = _queueing(mon)
    assert [f.target for f in found] == [QUEUED]
    f = found[0]
    assert f.severity in ("warn", "critical") and f.model == "m"
    ev = {e.signal: e for e in f.evidence}
    assert ev["waiting_min"].value is not None and ev["waiting_min"].value >= 6
    assert ev["queue_p95"].window == "1m"  # the fleet's window, not the direct mode's 30 s
    assert ev["queue_p95"].value > 2.5
    # the baseline is the instance's own healthy past (within the first 50 ms bucket)
    assert ev["queue_p95"].baseline is not None and ev["queue_p95"].baseline <= 0.05
    assert not any(f.target == HEALTHY for f in mon.diagnoser.findings)


def test_findings_reach_the_app_the_why_screen_and_the_event_log():
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.source import FleetSource
    from llmtop.ui.textshot import screen_lines
    from llmtop.ui.widgets.engines import WHY_BADGES

    fake = FakeFleet()
    mon = _monitor(fake)
    _run(mon, fake, QUEUE_FROM + 8)
    assert _queueing(mon), "the scenario must have queued by now"
    fake.clock -= STEP_S  # the app's first tick gets the latest refresh again, not a new one
    cfg = mon.config

    async def go():
        source = FleetSource(mon)
        app = LlmtopApp(source, tui_config(cfg))
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.pause(0.5)
            overview = screen_lines(app)
            diagnosis = list(app.diagnosis)
            events = [e.text for e in source.events() if e.target == QUEUED]
            await pilot.press("w")
            await pilot.pause(0.3)
            return overview, diagnosis, events, screen_lines(app)

    overview, diagnosis, events, why = asyncio.run(go())
    # imbalance (8+ waiting all window, its sibling none) is the cause the queue comes from
    assert "queueing" in [f.rule for f in diagnosis]
    assert {f.target for f in diagnosis} == {QUEUED}
    assert any(t.startswith("queueing (") for t in events), events
    badge = WHY_BADGES[diagnosis[0].rule][:6]  # the STATE cell names the top finding
    rows = [line for line in overview if line.startswith(" engine-")]
    assert [badge in line for line in rows] == [False, True], overview
    text = "\n".join(why)
    assert "queueing" in text and "engine-2" in text and "evidence:" in text
    assert mon.diagnoser.refreshes == QUEUE_FROM + 8  # the app's tick judged nothing twice


def test_the_same_refresh_is_judged_once_and_travel_starts_over():
    fake = FakeFleet()
    mon = _monitor(fake)
    _run(mon, fake, QUEUE_FROM + 8)
    assert _queueing(mon)
    before = mon.diagnoser.refreshes
    fake.clock -= STEP_S

    async def again():
        await mon.tick()  # too soon: the same snapshot
        await mon.tick()

    asyncio.run(again())
    assert mon.diagnoser.refreshes == before
    assert mon.diagnoser.on_refresh(mon.snapshot()) == []  # handed in again: ignored
    assert mon.diagnoser.refreshes == before
    mon.travel(T0 + (QUEUE_FROM + 7) * STEP_S)
    assert mon.diagnoser.findings == [] and mon.diagnoser.refreshes == 0
    _run(mon, fake, 1)
    found = _queueing(mon)  # judged at the past time, with no baseline from the live fleet
    assert [f.target for f in found] == [QUEUED]
    assert all(e.baseline is None for e in found[0].evidence)
    assert mon.diagnoser.diagnoser.tracker.baselines([r.key for r in mon.snapshot().engines],
                                                     mon.eval_time, 60.0) == {}


def test_a_refresh_in_flight_when_travelling_is_not_judged():
    fake = FakeFleet()
    mon = _monitor(fake)
    _run(mon, fake, 3)
    assert mon.diagnoser.refreshes == 3
    evaluate = mon._evaluate

    async def travel_meanwhile(t: float) -> Snapshot:
        snap = await evaluate(t)
        mon.travel(T0)  # the user presses T while this (live) refresh is in flight
        return snap

    mon._evaluate = travel_meanwhile  # type: ignore[method-assign]
    _run(mon, fake, 1)
    assert mon.diagnoser.refreshes == 0  # the live rows never reach the past's diagnosis


def _row(t: float, waiting: float | None, state: str = "ok") -> EngineRow:
    return EngineRow(key="a|m", target="a", engine="vllm", model="m", state=state,
                     waiting=waiting, ttft_s=Quantiles(count=0.0))


def test_waiting_min_and_restart_ages_from_earlier_refreshes():
    d = FleetDiagnosis()
    seen = []
    for i, w in enumerate([0, 3, 4, 5, 6, 7, 8, 9]):
        t = T0 + i * STEP_S
        seen.append(d._waiting_min(t, [_row(t, w)], 30.0))
    assert seen[0] == {} and seen[1] == {}  # fewer than 3 refreshes in the window
    assert seen[2] == {"a|m": 0.0}
    assert seen[-1] == {"a|m": 6.0}  # 30 s back: 6, 7, 8, 9
    ages = [d._restart_ages(T0 + i * STEP_S, [_row(0, 1, s)])
            for i, s in enumerate(["ok", "restarted", "restarted", "ok", "restarted"])]
    assert ages[0] == {} and ages[1] == {"a": 0.0} and ages[2] == {"a": STEP_S}
    assert ages[4] == {"a": 0.0}  # seen in another state between: a new restart


def test_replay_warms_from_the_recorded_refreshes_before_a_seek():
    times = [T0 + i for i in range(0, 400)]  # one refresh a second
    idx = warm_times(times, 399)
    assert idx and idx[-1] < 399 and times[399] - times[idx[0]] <= 330.0 + 1e-6
    gaps = {times[b] - times[a] for a, b in itertools.pairwise(idx)}
    assert gaps == {10.0} and len(idx) <= 34
    assert warm_times(times, 0) == [] and warm_times([], 0) == []


def test_a_fleet_replay_diagnoses_what_it_plays(tmp_path):
    from llmtop.cli.fleet import fleet_recorder
    from llmtop.fleet.replay import FleetReplay
    from llmtop.record.reader import Recording

    fake = FakeFleet()
    mon = _monitor(fake)
    path = str(tmp_path / "fleet.llrec")
    rec = fleet_recorder(mon.config, path)
    mon.sink = rec.record
    _run(mon, fake, QUEUE_FROM + 8)
    rec.close()
    live = [(f.rule, f.target, f.severity) for f in mon.diagnoser.findings]
    assert ("queueing", QUEUED, "critical") in live
    clock = {"t": 0.0}
    # the shown refresh is rebuilt at the first tick and the warm-up rebuilds earlier ones:
    # each from the same recorded answers
    replay = FleetReplay(Recording.open(path), at=T0 + (QUEUE_FROM + 7) * STEP_S,
                         clock=lambda: clock["t"])
    asyncio.run(replay.tick())
    # warmed with the recording's refreshes before the position: the same findings, with
    # the same baseline
    assert [(f.rule, f.target, f.severity) for f in replay.diagnoser.findings] == live
    assert [f.evidence for f in replay.diagnoser.findings] == \
        [f.evidence for f in mon.diagnoser.findings]
    assert any(e.baseline is not None for f in replay.diagnoser.findings for e in f.evidence)
    assert any(e.target == QUEUED for e in replay.diagnoser.take_events())
    replay.travel(T0)
    asyncio.run(replay.tick())
    assert replay.diagnoser.findings == [] and replay.diagnoser.refreshes == 1


def test_once_has_no_baseline_and_says_so_in_its_findings():
    import io
    import json

    from llmtop.cli.fleet import run_fleet_once

    fake = FakeFleet()
    fake.queue_from = -(10**9)  # whatever the wall clock: queueing for ever
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", scrape_interval_s=10.0))
    out = io.StringIO()
    assert run_fleet_once(cfg, as_json=True, out=out,
                          transport=httpx.MockTransport(fake.handler)) == 0
    doc = json.loads(out.getvalue())
    found = [f for f in doc["diagnosis"] if f["rule"] == "queueing"]
    assert [f["target"] for f in found] == [QUEUED]  # an absolute rule fires without one
    assert all(e.get("baseline") is None for e in found[0]["evidence"])
    assert not math.isnan(doc["window_s"])


def test_a_real_prometheus_fleet_names_the_instance_in_trouble(prometheus_url, demo_fleet):
    """End to end on a real Prometheus scraping the demo fleet every second: the vLLM in the
    ``kv-pressure`` scenario (after its healthy start) gets ``kv_pressure``, its evidence over
    the fleet's window, and an event-log line; no other instance gets it."""
    import time

    trouble = {e.instance for e in demo_fleet.engines if e.trouble}
    assert len(trouble) == 1
    cfg = Config(prometheus=PrometheusConfig(url=prometheus_url, window_s=10.0))

    async def go():
        mon = FleetMonitor(cfg)
        events = []
        try:
            deadline = time.monotonic() + 120  # the scenario's healthy start is 30 s
            while time.monotonic() < deadline:
                await mon.tick()
                events += mon.diagnoser.take_events()
                kv = [f for f in mon.diagnoser.findings if f.rule == "kv_pressure"]
                if kv:
                    return mon.diagnoser.refreshes, kv, events
                await asyncio.sleep(1.1)
            return mon.diagnoser.refreshes, [], events
        finally:
            await mon.aclose()

    refreshes, kv, events = asyncio.run(go())
    assert kv, f"no kv_pressure after {refreshes} refreshes; events: {events}"
    assert {f.target for f in kv} == trouble
    assert all(e.window in ("10s", "now") for f in kv for e in f.evidence)
    assert any(e.target in trouble and e.text.startswith("kv_pressure (") for e in events)
