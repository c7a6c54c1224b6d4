"""The fleet diagnosis' warm-up from the server's history (``llmtop/fleet/warm.py``).

A fake Prometheus (``httpx.MockTransport``) answers instant and range queries from one
scenario: two vLLM instances of one model, 2 requests/s each, TTFT p95 under 0.1 s; from
``spike_at`` on, instance 2's TTFT is 5x higher (p95 ~1 s). The warm-up's range answers
and the refreshes' instant answers come from the same function of time, so a warmed
diagnosis sees the calm past as the baseline at its first refresh. Real servers at the end.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
import time
from typing import Any

import httpx
import pytest

from llmtop.config import Config, PrometheusConfig
from llmtop.diagnose.signals import BASELINE_SIGNALS, SIGNALS
from llmtop.diagnose.thresholds import BASELINE_KEEP_S
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.warm import WARM_STEP_S, fetch, pick_step, span

from .conftest import latency_params, query_role

T0 = 1_795_600_000.0
STEP_S = 10.0
CALM, SLOW = "engine-1.invalid:8000", "engine-2.invalid:8000"
LE = ("0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "+Inf")
REQ_S = 2.0
NAMES = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
         "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
         "vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds_count"]
DISCOVERY = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"__name__": n, "job": "vllm"}, "value": [1, "1"]} for n in NAMES]}}


def _values(instance: str, t: float, spike: tuple[float, float], waiting: float
            ) -> dict[str, Any]:
    """What one instance reports at ``t``: gauges, counter rates, bucket rates."""
    slow = instance == SLOW and spike[0] <= t < spike[1]
    ttft = (0, 0, 0, 0.2, 0.4, 2.0, 2.0) if slow else (1.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0)
    return {
        "gauges": {"vllm:num_requests_running": 8.0, "vllm:num_requests_waiting": waiting,
                   "vllm:kv_cache_usage_perc": 0.3},
        "counters": {"vllm:request_success_total": REQ_S,
                     "vllm:time_to_first_token_seconds_sum": REQ_S * (1.0 if slow else 0.05),
                     "vllm:time_to_first_token_seconds_count": REQ_S},
        "buckets": {"vllm:time_to_first_token_seconds_bucket": ttft},
    }


class Fake:
    """The scenario's Prometheus: instance 2 is slow from ``spike_at`` until ``spike_end``;
    ``range_status``: answer range queries with this HTTP status instead (a failed
    warm-up); ``history_from``: no samples before this time."""

    def __init__(self, spike_at: float = float("inf"), waiting: float = 0.0,
                 spike_end: float = float("inf")) -> None:
        self.clock = T0
        self.spike_at = spike_at
        self.spike_end = spike_end
        self.waiting = waiting
        self.range_status = 200
        self.history_from = float("-inf")
        self.ranges: list[dict[str, str]] = []
        self.gate: asyncio.Event | None = None

    def series(self, role: str, t: float) -> list[tuple[dict[str, str], float]]:
        items: list[tuple[dict[str, str], float]] = []
        if t < self.history_from:
            return items
        for inst in (CALM, SLOW):
            base = {"instance": inst, "job": "vllm", "model_name": "m"}
            if role == "state":
                items += [({**base, "llmtop_name": "inventory:vllm"}, 1.0),
                          ({**base, "llmtop_name": "last_ts:vllm"}, t - 1),
                          ({"instance": inst, "job": "vllm", "llmtop_name": "up"}, 1.0)]
                continue
            now = _values(inst, t, (self.spike_at, self.spike_end), self.waiting)
            for name, v in now[role].items():
                if role == "buckets":
                    items += [({**base, "llmtop_name": name, "le": le}, b)
                              for le, b in zip(LE, v, strict=True)]
                else:
                    items.append(({**base, "llmtop_name": name}, v))
        return items

    async def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/api/v1/status/buildinfo"):
            return httpx.Response(200, json={"status": "success", "data": {"version": "2.42.0"}})
        if path.endswith(("/api/v1/targets", "/api/v1/label/__name__/values")):
            return httpx.Response(404, text="404 page not found")
        if path.endswith("/api/v1/metadata"):
            return httpx.Response(200, json={"status": "success", "data": {}})
        form = dict(httpx.QueryParams(request.content.decode()))
        q = form.get("query", "")
        role = query_role(q)
        if role == "discovery":
            return httpx.Response(200, json=DISCOVERY)
        if path.endswith("/query_range"):
            self.ranges.append(form)
            if self.gate is not None:
                await self.gate.wait()
            if self.range_status != 200:
                return httpx.Response(self.range_status, json={
                    "status": "error", "errorType": "execution", "error": "query timed out"})
            start, end, step = (float(form[k]) for k in ("start", "end", "step"))
            times = [start + i * step for i in range(round((end - start) / step) + 1)]
            by: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
            for ts in times:
                for m, v in self.series(role, ts):
                    by.setdefault(tuple(sorted(m.items())), []).append([ts, repr(v)])
            result = [{"metric": dict(k), "values": vs} for k, vs in by.items()]
            return httpx.Response(200, json={"status": "success", "data": {
                "resultType": "matrix", "result": result}})
        t = float(form.get("time", self.clock))
        result = [{"metric": m, "value": [t, repr(v)]} for m, v in self.series(role, t)]
        return httpx.Response(200, json={"status": "success",
                                         "data": {"resultType": "vector", "result": result}})


def _config(**kw: Any) -> Config:
    return Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090",
                                              scrape_interval_s=10.0, **kw))


def _monitor(fake: Fake, **kw: Any) -> FleetMonitor:
    return FleetMonitor(_config(**kw), transport=httpx.MockTransport(fake.handler),
                        clock=lambda: fake.clock)


def _first(mon: FleetMonitor, warm: bool = True) -> tuple[Any, list[str]]:
    """The first refresh and what the diagnosis found after the warm-up landed."""
    mon.warm_baseline = warm

    async def go() -> Any:
        try:
            snap = await mon.tick()
            await mon.warmed()
            return snap
        finally:
            await mon.aclose()

    snap = asyncio.run(go())
    return snap, [f"{f.rule}@{f.target}" for f in mon.diagnoser.findings]


def test_a_calm_history_is_the_baseline_of_the_first_refresh():
    fake = Fake(spike_at=T0 - 30)  # the spike started 30 s before llmtop was opened
    mon = _monitor(fake)
    snap, found = _first(mon)
    assert len(snap.engines) == 2
    assert found == [f"ttft_rise@{SLOW}"]
    f = mon.diagnoser.findings[0]
    ev = {e.signal: e for e in f.evidence}
    assert ev["ttft_p95"].value > 0.8 and ev["ttft_p95"].baseline is not None
    assert ev["ttft_p95"].baseline < 0.1  # the calm past, not the spike
    # one range query per role, over the 15 minutes before the first refresh's window
    assert sorted(query_role(r["query"]) for r in fake.ranges) == ["buckets", "counters", "gauges"]
    start, end = float(fake.ranges[0]["start"]), float(fake.ranges[0]["end"])
    assert float(fake.ranges[0]["step"]) == WARM_STEP_S
    assert start % WARM_STEP_S == 0 and end % WARM_STEP_S == 0  # aligned: cacheable
    assert snap.time - BASELINE_KEEP_S < start and end <= snap.time - mon.window_s
    assert mon.diagnoser.warm_points >= 3
    lines = [e.text for e in mon.diagnoser.take_events()]
    assert any(t.startswith("ttft_rise (") for t in lines), lines
    assert any("baseline from the server's history" in t for t in lines), lines


def test_without_the_warm_up_the_first_refresh_has_no_baseline():
    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)
    _snap, found = _first(mon, warm=False)
    assert found == []  # ttft_rise needs a baseline: none yet
    assert fake.ranges == []


def test_calm_then_calm_finds_nothing_and_a_past_spike_is_not_news():
    # never slow; slow from 10 min to 5 min ago (a spike the history holds, over now)
    for fake in (Fake(), Fake(spike_at=T0 - 600, spike_end=T0 - 300)):
        mon = _monitor(fake)
        _snap, found = _first(mon)
        assert found == []
        assert mon.diagnoser.warm_points >= 3
        # the past's rows ran no rule: no finding line of the past presented as now
        assert [e for e in mon.diagnoser.take_events() if e.target is not None] == []


def test_warm_points_feed_the_baseline_only_not_waiting_min_nor_restarts():
    fake = Fake(waiting=12.0)  # a queue in every past point
    mon = _monitor(fake)
    _first(mon)
    d = mon.diagnoser
    assert d.warm_points >= 3
    # one refresh seen: waiting_min needs 3 refreshes in the window, the warm points are not
    assert {k: len(v) for k, v in d._waiting.items()} == {f"{CALM}|m": 1, f"{SLOW}|m": 1}
    assert d._restart_at == {} and d.refreshes == 1


def test_a_failed_warm_up_starts_cold_and_says_so():
    fake = Fake(spike_at=T0 - 30)
    fake.range_status = 503
    mon = _monitor(fake)
    snap, found = _first(mon)
    assert len(snap.engines) == 2 and mon.error is None  # the refresh itself is fine
    assert found == []  # cold, as without a warm-up
    assert mon.warmup is not None and mon.warmup.error
    lines = [(e.level, e.text) for e in mon.diagnoser.take_events()]
    assert any(lv == "warn" and "no baseline from the server's history" in t
               for lv, t in lines), lines


def test_no_history_or_too_little_says_so():
    fake = Fake(spike_at=T0 - 30)
    fake.history_from = T0 - 50  # only the window's own samples
    mon = _monitor(fake)
    _snap, found = _first(mon)
    assert found == [] and mon.diagnoser.warm_points == 0
    assert any("no baseline" in e.text for e in mon.diagnoser.take_events())
    fake = Fake(spike_at=T0 - 30)
    fake.history_from = T0 - 2 * WARM_STEP_S - 60  # one or two points: fewer than 3
    mon = _monitor(fake)
    _snap, found = _first(mon)
    assert found == [] and 1 <= mon.diagnoser.warm_points <= 2
    assert any(e.level == "warn" and "relative rules wait for more" in e.text
               for e in mon.diagnoser.take_events())


def test_the_first_refresh_shows_before_the_warm_up_lands():
    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)

    async def go() -> tuple[list[str], list[str], int]:
        fake.gate = asyncio.Event()
        try:
            await asyncio.wait_for(mon.tick(), 5)  # not held up by the range queries
            await asyncio.sleep(0.05)
            before = [f.rule for f in mon.diagnoser.findings]
            asked = len(fake.ranges)
            fake.gate.set()
            await mon.warmed()
            return before, [f.rule for f in mon.diagnoser.findings], asked
        finally:
            await mon.aclose()

    before, after, asked = asyncio.run(go())
    assert asked == 3 and before == [] and after == ["ttft_rise"]


def test_travel_warms_from_the_history_before_the_new_time():
    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)

    async def go() -> list[str]:
        try:
            await mon.tick()
            await mon.warmed()
            assert [f.rule for f in mon.diagnoser.findings] == ["ttft_rise"]
            mon.travel(T0 - 3600)  # an hour back: calm then
            fake.clock += STEP_S
            await mon.tick()
            await mon.warmed()
            calm = [f.rule for f in mon.diagnoser.findings]
            assert mon.diagnoser.warm_points >= 3 and calm == []
            mon.travel(T0 - 20)  # into the spike: judged against the calm before it
            await mon.tick()
            await mon.warmed()
            return [f"{f.rule}@{f.target}" for f in mon.diagnoser.findings]
        finally:
            await mon.aclose()

    assert asyncio.run(go()) == [f"ttft_rise@{SLOW}"]
    ends = sorted(float(r["end"]) for r in fake.ranges)
    assert ends[0] <= T0 - 3600 - 60  # the hour-back warm-up asked the hour back


def test_a_warm_up_overtaken_by_travel_is_dropped():
    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)

    async def go() -> None:
        fake.gate = asyncio.Event()
        try:
            await mon.tick()
            await asyncio.sleep(0.05)
            mon.travel(T0 - 3600)  # while the live warm-up's queries are in flight
            fake.gate.set()
            await asyncio.sleep(0.05)
            assert mon.diagnoser.findings == [] and mon.diagnoser.warm_points == 0
        finally:
            await mon.aclose()

    asyncio.run(go())


def test_once_json_is_judged_on_the_warmed_baseline():
    from llmtop.cli.fleet import run_fleet_once

    fake = Fake(spike_at=0.0)  # whatever the wall clock: the spike is on
    fake.spike_at = time.time() - 60
    out = io.StringIO()
    assert run_fleet_once(_config(), as_json=True, out=out,
                          transport=httpx.MockTransport(fake.handler)) == 0
    doc = json.loads(out.getvalue())
    assert [(f["rule"], f["target"]) for f in doc["diagnosis"]] == [("ttft_rise", SLOW)]
    b = doc["baseline"]
    assert b["source"] == "prometheus_history" and b["points"] >= 3 and b["error"] is None
    assert b["step_s"] == WARM_STEP_S and b["queries"] == 3 and b["end"] <= doc["time"] - 60

    fake.range_status = 422
    out = io.StringIO()
    assert run_fleet_once(_config(), as_json=True, out=out,
                          transport=httpx.MockTransport(fake.handler)) == 0
    doc = json.loads(out.getvalue())
    assert doc["diagnosis"] == [] and doc["baseline"]["error"]
    assert not any("baseline" in w for w in doc["warnings"])  # the refresh's own, as before
    assert "no baseline from the server's history" in doc["baseline"]["note"]

    out = io.StringIO()  # the table says it too
    fake.range_status = 200
    assert run_fleet_once(_config(), out=out, transport=httpx.MockTransport(fake.handler)) == 0
    assert "baseline from the server's history: " in out.getvalue()
    assert "ttft_rise" in out.getvalue()


def test_warm_rows_are_the_instant_rows_at_the_same_times():
    fake = Fake(spike_at=T0 - 400)
    mon = _monitor(fake)

    async def go() -> tuple[Any, dict[float, Any]]:
        try:
            await mon.tick()
            got = await fetch(mon.client, mon.plan, T0, mon.window_s)
            inst = {}
            for ts, _ in got.points:
                mon.travel(ts)
                inst[ts] = await mon.tick()
            return got, inst
        finally:
            await mon.aclose()

    got, inst = asyncio.run(go())
    assert len(got.points) >= 4
    for ts, rows in got.points:
        want = {r.key: [SIGNALS[n](r) for n in BASELINE_SIGNALS] for r in inst[ts].engines}
        assert {r.key: [SIGNALS[n](r) for n in BASELINE_SIGNALS] for r in rows} == want


def test_span_keeps_to_the_baseline_and_out_of_the_window():
    t = 1_000_000.0 + 37
    start, end = span(t, 60.0)
    assert start > t - BASELINE_KEEP_S and end <= t - 60
    assert start % WARM_STEP_S == 0 and end % WARM_STEP_S == 0
    assert 4 <= (end - start) / WARM_STEP_S + 1 <= 5
    assert span(t, 800.0) is None  # a window as long as the baseline: nothing older
    assert pick_step(60.0) == WARM_STEP_S and pick_step(120.0) == WARM_STEP_S
    for window in (600.0, 700.0, 840.0):  # a long window: a shorter step, 4 or more points
        step = pick_step(window)
        start, end = span(t, window, step)
        assert step < WARM_STEP_S and step % 10 == 0 and (end - start) / step + 1 >= 4


# ---------------------------------------------------------------- real servers


def test_real_warm_points_equal_instant_refreshes(fleet_backend, demo_fleet):
    """On a real Prometheus and VictoriaMetrics scraping the demo fleet every second: each
    warm-up point's rows hold the numbers an instant refresh at that time gives, and
    ``--at`` gets a baseline."""
    prometheus_url = fleet_backend.url
    # seconds, not minutes: a 5 s window, points 2.5 s apart (the product: 180 s, 10 s)
    window, step = 5.0, 2.5
    params = latency_params(fleet_backend.kind)
    cfg = Config(prometheus=PrometheusConfig(url=prometheus_url, window_s=window, params=params))

    async def go() -> tuple[Any, dict[float, Any], Any]:
        mon = FleetMonitor(cfg, lean=True)  # the warm-up's plan: no detail-only histograms
        mon.warm_baseline = False
        try:
            deadline = time.monotonic() + 120
            while True:  # until the server holds 20 s of every ok row's history
                mon._refreshed_at = None
                snap = await mon.tick()
                t = snap.time - window
                got = await fetch(mon.client, mon.plan, t, mon.window_s, step_s=step)
                ok = sum(r.state == "ok" for r in snap.engines)
                full = [ts for ts, rows in got.points if len(rows) >= ok]
                if (ok >= 3 and full and t - full[0] >= 20) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)
            inst = {}
            for ts, _ in got.points:
                mon.travel(ts)
                inst[ts] = await mon.tick()
            # --at: the first refresh at a past time is judged on the history before it
            import llmtop.fleet.warm as w
            from llmtop.fleet.diagnosis import FleetDiagnosis

            saved = w.WARM_STEP_S, FleetDiagnosis.baseline_step_s
            w.WARM_STEP_S = FleetDiagnosis.baseline_step_s = step
            mon2 = FleetMonitor(Config(prometheus=PrometheusConfig(
                url=prometheus_url, window_s=window, at=t, params=params)))
            try:
                try:
                    at_snap = await mon2.tick()
                    await mon2.warmed()
                finally:
                    w.WARM_STEP_S, FleetDiagnosis.baseline_step_s = saved
                keys = [r.key for r in at_snap.engines if r.state == "ok"]
                bases = mon2.diagnoser.diagnoser.tracker.baselines(keys, t, window)
            finally:
                await mon2.aclose()
            return got, inst, (mon2.diagnoser.warm_points, keys, bases,
                    full[0] if full else -math.inf)
        finally:
            await mon.aclose()

    got, inst, (taken, keys, bases, oldest) = asyncio.run(go())
    assert got.error is None and got.points, got.error
    # points a window (5 s) past the oldest point holding every row that was ok when the
    # wait ended (the server may hold older points of fewer rows: instances still starting,
    # or earlier tests' fleets)
    fresh = [(ts, rows) for ts, rows in got.points if ts - oldest > 8]
    assert len(fresh) >= 3, [(ts - oldest, len(rows)) for ts, rows in got.points]
    compared = 0
    for ts, rows in fresh:
        want = {r.key: r for r in inst[ts].engines if r.state == "ok"}
        for r in rows:
            if r.key not in want:
                continue
            for n in BASELINE_SIGNALS:
                a, b = SIGNALS[n](r), SIGNALS[n](want[r.key])
                assert a == pytest.approx(b, rel=1e-9, abs=1e-12), (ts, r.key, n, a, b)
                compared += a is not None
    assert compared > 50, (fleet_backend.kind, [(ts, len(rows)) for ts, rows in fresh])
    assert taken >= 3 and keys
    assert len(set(bases) & set(keys)) >= len(keys) - 1, (keys, list(bases))


def test_the_tui_paints_first_then_shows_the_warmed_findings():
    from llmtop.cli.fleet import tui_config
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.source import FleetSource
    from llmtop.ui.textshot import screen_lines

    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)

    async def go() -> tuple[list[str], list[str], list[str], list[str]]:
        fake.gate = asyncio.Event()  # the warm-up's range queries wait
        source = FleetSource(mon)
        app = LlmtopApp(source, tui_config(mon.config))
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.pause(0.5)
            first = screen_lines(app)
            cold = [f.rule for f in app.diagnosis]
            fake.gate.set()
            await mon.warmed()
            await app.poll_once()  # the next tick: the same refresh, judged again
            await pilot.pause(0.3)
            warm = [f.rule for f in app.diagnosis]
            lines = [e.text for e in source.events()]
        return first, cold, warm, lines

    first, cold, warm, lines = asyncio.run(go())
    assert any(line.startswith(" engine-2") for line in first), first  # painted, not held
    assert cold == [] and warm == ["ttft_rise"]
    assert any("baseline from the server's history" in t for t in lines), lines
    assert sum(t.startswith("ttft_rise (") for t in lines) == 1, lines


def test_a_warm_up_for_another_refresh_changes_nothing():
    from llmtop.fleet.diagnosis import FleetDiagnosis
    from llmtop.model import Snapshot

    fake = Fake(spike_at=T0 - 30)
    mon = _monitor(fake)
    mon.warm_baseline = False

    async def go() -> tuple[Snapshot, Any]:
        try:
            snap = await mon.tick()
            return snap, await fetch(mon.client, mon.plan, snap.time, mon.window_s)
        finally:
            await mon.aclose()

    snap, got = asyncio.run(go())
    d = FleetDiagnosis()
    d.begin_warm()
    d.on_refresh(snap)
    assert d.warm(got.points, snap.time - 3600) is None  # asked for another time's refresh
    assert d.warm_failed(snap.time - 3600) is False and d.findings == []
    assert d.warm(got.points, snap.time) == len(got.points) >= 3  # still awaited: applies
    assert [f.rule for f in d.findings] == ["ttft_rise"]
    assert d.warm(got.points, snap.time) is None  # once


def test_the_warm_up_leaves_a_given_transport_open_for_the_refreshes():
    class Closable(httpx.MockTransport):
        closed = False

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if self.closed:
                raise httpx.ConnectError("transport closed")
            return await super().handle_async_request(request)

        async def aclose(self) -> None:
            self.closed = True

    fake = Fake(spike_at=T0 - 30)
    tr = Closable(fake.handler)
    mon = FleetMonitor(_config(), transport=tr, clock=lambda: fake.clock)

    async def go() -> Any:
        try:
            await mon.tick()
            await mon.warmed()
            fake.clock += STEP_S
            snap = await mon.tick()
            return snap, mon.error, tr.closed
        finally:
            await mon.aclose()

    snap, error, closed = asyncio.run(go())
    assert error is None and len(snap.engines) == 2 and not closed
    assert mon.diagnoser.warm_points >= 3 and tr.closed  # closed by the monitor, at the end
