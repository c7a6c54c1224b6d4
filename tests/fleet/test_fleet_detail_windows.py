"""The fleet detail screen's other windows (``FleetMonitor.row_windows``, ``FleetSource.focus``):
the drilled-in row at 10 s / 1 m / 5 m from a few instant queries pinned to that row, at the
fleet snapshot's own evaluation time; a window under 2 x the scrape interval is None, never 0.

A fake server whose answers depend on the asked window checks the plumbing (which query, which
time, which row); the real Prometheus and VictoriaMetrics of ``conftest.py`` check the 5 m
values against their own PromQL over 5 m at the same time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re

import httpx
import pytest

from llmtop.cli.fleet import tui_config
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.queries import Plan
from llmtop.ui.app import LlmtopApp
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.source import FleetSource
from llmtop.ui.textshot import screen_lines

from .conftest import latency_params

RUN = "vllm:num_requests_running"
GEN = "vllm:generation_tokens_total"
TTFT = "vllm:time_to_first_token_seconds_bucket"
INSTANCES = ("engine-1.invalid:8000", "engine-2.invalid:8000")
T0 = 1_795_600_000.0
"""Evaluation time of the fake server's refreshes (the clock is pinned 3 s later)."""


def _json(body: dict) -> httpx.Response:
    return httpx.Response(200, json=body)


def _vector(items: list[dict]) -> httpx.Response:
    return _json({"status": "success", "data": {"resultType": "vector", "result": items}})


def _item(name: str, inst: str, value: float, t: float, **extra: str) -> dict:
    return {"metric": {"llmtop_name": name, "instance": inst, "job": "vllm",
                       "model_name": "m", **extra}, "value": [t, repr(value)]}


def gen_rate(inst: str, window_s: float, t: float) -> float:
    """The fake server's generation rate: it names the window, the instance and the time."""
    return window_s / 10 + INSTANCES.index(inst) + (t - T0) / 1000


def running(inst: str, t: float) -> float:
    """The fake server's running gauge: it names the instance and the time."""
    return (t - T0) / 10 + INSTANCES.index(inst) + 1


def fake_prometheus(sent: list[dict[str, str]], scrape: str = "10s") -> httpx.MockTransport:
    """A server with two vLLM instances: a gauge, a counter and a histogram whose rates depend
    on the asked window (``[Ns]``); each query's form is appended to ``sent``."""

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/api/v1/status/buildinfo"):
            return _json({"status": "success", "data": {"version": "2.53.0"}})
        if path.endswith("/api/v1/targets"):
            return _json({"status": "success", "data": {"activeTargets": [
                {"labels": {"job": "vllm", "instance": i}, "scrapeInterval": scrape,
                 "health": "up"} for i in INSTANCES]}})
        if path.endswith("/api/v1/metadata"):
            return _json({"status": "success", "data": {}})
        if "/api/v1/label/" in path:
            return _json({"status": "success", "data": [RUN, GEN, TTFT]})
        form = dict(httpx.QueryParams(request.content.decode()))
        sent.append(form)
        q, t = form["query"], float(form["time"])
        if q.startswith("count by (__name__, job)"):  # the jobs of the engines
            return _vector([{"metric": {"__name__": RUN, "job": "vllm"}, "value": [t, "2"]}])
        m = re.search(r"rate\([^\[]*\[(\d+)s\]", q)
        w = float(m.group(1)) if m else 0.0
        insts = [i for i in INSTANCES if f'instance="{i}"' in q] or list(INSTANCES)
        out: list[dict] = []
        for inst in insts:
            if m and TTFT in q:  # cumulative bucket rates; the spread grows with the window
                for le, v in (("0.1", 1.0), ("0.5", 1 + w / 60), ("1.0", 2 + w / 60),
                              ("+Inf", 2 + w / 60)):
                    out.append(_item(TTFT, inst, v, t, le=le))
            elif m and GEN in q:
                out.append(_item(GEN, inst, gen_rate(inst, w, t), t))
            elif q.startswith("label_replace(sum by") and RUN in q:
                out.append(_item(RUN, inst, running(inst, t), t))
        return _vector(out)

    return httpx.MockTransport(handler)


def _monitor(sent: list[dict[str, str]], scrape: str = "10s", **kw) -> FleetMonitor:
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", **kw))
    return FleetMonitor(cfg, transport=fake_prometheus(sent, scrape), clock=lambda: T0 + 3)


def _windows(key: str, windows: tuple[float, ...], scrape: str = "10s"):
    """One refresh, then ``row_windows(key, windows)``: (monitor, snapshot, the forms sent
    for the windows, their rows)."""
    sent: list[dict[str, str]] = []

    async def go():
        mon = _monitor(sent, scrape)
        snap = await mon.tick()
        n = len(sent)
        got = await mon.row_windows(key, windows)
        await mon.aclose()
        return mon, snap, sent[n:], got

    return asyncio.run(go())


def _selectors(query: str) -> list[str]:
    return re.findall(r"\{([^{}]*)\}", query)


def test_other_windows_are_pinned_queries_at_the_snapshots_time():
    key = f"{INSTANCES[0]}|m"
    mon, snap, asked, got = _windows(key, (10.0, 60.0, 300.0))
    assert snap.time == T0 and mon.window_s == 60.0 and mon.scrape_interval_s == 10.0
    own = next(r for r in snap.engines if r.key == key)
    assert got[60.0] is own  # the fleet window: the snapshot's own row, no query
    assert got[10.0] is None  # 10 s < 2 x 10 s: nothing asked, nothing made up
    five = got[300.0]
    assert five is not None and five.key == key
    assert five.generation_tokens_per_s == pytest.approx(gen_rate(INSTANCES[0], 300, T0))
    assert own.generation_tokens_per_s == pytest.approx(gen_rate(INSTANCES[0], 60, T0))
    assert own.running == running(INSTANCES[0], T0)
    assert five.running is None  # gauges have no window: not asked again, not made up
    assert five.ttft_s is not None and own.ttft_s is not None
    assert five.ttft_s.p90 != own.ttft_s.p90  # the buckets of its own window
    # one counters and one buckets query, both at the snapshot's time, every selector
    # pinned to the row's instance, rates over 300 s only
    assert len(asked) == 2
    for form in asked:
        assert float(form["time"]) == snap.time
        sels = _selectors(form["query"])
        assert sels and all(f'instance="{INSTANCES[0]}"' in s for s in sels), form["query"]
        assert INSTANCES[1] not in form["query"]
        assert set(re.findall(r"\[(\d+)s\]", form["query"])) <= {"300"}


def test_a_too_short_window_is_none_not_zero_and_says_why():
    mon, _snap, asked, got = _windows(f"{INSTANCES[1]}|m", (10.0, 19.0, 20.0))
    assert got[10.0] is None and got[19.0] is None  # not a row of zeros
    assert got[20.0] is not None and got[20.0].generation_tokens_per_s == pytest.approx(
        gen_rate(INSTANCES[1], 20, T0))
    assert all("[10s]" not in f["query"] and "[19s]" not in f["query"] for f in asked)
    assert mon.window_note(10.0) == ("10 s < 2 \u00d7 scrape interval 10 s: "
                                     "rate() needs two samples")
    assert mon.window_note(20.0) is None


def test_each_window_asks_its_own_rates():
    _mon, _snap, asked, got = _windows(f"{INSTANCES[0]}|m", (10.0, 120.0, 300.0), "5s")
    assert len(asked) == 2 * 3  # <= 3 per extra window
    for w in (10.0, 120.0, 300.0):
        row = got[w]
        assert row is not None
        assert row.generation_tokens_per_s == pytest.approx(gen_rate(INSTANCES[0], w, T0))


def test_unknown_row_or_failed_queries_give_none_and_never_raise():
    sent: list[dict[str, str]] = []

    async def go():
        mon = _monitor(sent)
        before = await mon.row_windows("x|m", (300.0,))  # no snapshot yet
        await mon.tick()
        unknown = await mon.row_windows("nowhere:1|m", (300.0,))
        mon.client = type(mon.client)(mon.cfg, transport=httpx.MockTransport(
            lambda r: httpx.Response(503, text="overloaded")))
        failed = await mon.row_windows(f"{INSTANCES[0]}|m", (300.0, 60.0))
        return before, unknown, failed

    before, unknown, failed = asyncio.run(go())
    assert before == {300.0: None} and unknown == {300.0: None}
    assert failed[300.0] is None and failed[60.0] is not None


def test_a_plan_without_detail_buckets_asks_the_fleet_window_for_the_row_too():
    """The TUI's lean plan (``detail_only``) leaves some buckets out of each refresh: the
    drilled-in row gets them at the fleet window too, from the same pinned queries."""
    sent: list[dict[str, str]] = []
    key = f"{INSTANCES[0]}|m"

    async def go():
        mon = _monitor(sent)
        snap = await mon.tick()
        plan = mon.plan
        if "detail_only" in Plan.__dataclass_fields__:
            mon.plan = dataclasses.replace(plan, detail_only=frozenset({TTFT}))
        else:
            class Lean(Plan):
                detail_only = frozenset({TTFT})
            mon.plan = Lean(**{f: getattr(plan, f) for f in Plan.__dataclass_fields__})
        n = len(sent)
        got = await mon.row_windows(key, (60.0,))
        return snap, sent[n:], got

    snap, asked, got = asyncio.run(go())
    assert len(asked) == 2 and all("[60s]" in f["query"] for f in asked)
    assert any(TTFT in f["query"] for f in asked)
    row = got[60.0]
    assert row is not None and row is not next(r for r in snap.engines if r.key == key)
    assert row.ttft_s is not None and row.generation_tokens_per_s == pytest.approx(
        gen_rate(INSTANCES[0], 60, T0))


# ----------------------------------------------------------------------------- FleetSource


def test_fleet_source_answers_other_windows_only_for_the_focused_row_at_its_time():
    sent: list[dict[str, str]] = []
    now = [T0 + 3]
    key = f"{INSTANCES[0]}|m"

    async def go():
        cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
        mon = FleetMonitor(cfg, transport=fake_prometheus(sent), clock=lambda: now[0])
        src = FleetSource(mon)
        await src.tick()
        unfocused = src.snapshot(300.0)
        n = len(sent)
        await src.focus(key, (10.0, 60.0, 300.0))
        first = src.snapshot(300.0)
        now[0] += 10  # the next refresh: the focused row is fetched again, at its time
        await src.tick()
        second = src.snapshot(300.0)
        short = src.snapshot(10.0)
        asked_focused = len(sent) - n
        src.focus(None)
        now[0] += 10
        m = len(sent)
        await src.tick()
        return unfocused, first, second, short, asked_focused, len(sent) - m, src

    unfocused, first, second, short, asked_focused, asked_after, src = asyncio.run(go())
    assert unfocused is None
    assert first is not None and first.time == T0 and [r.key for r in first.engines] == [key]
    assert first.engines[0].generation_tokens_per_s == pytest.approx(
        gen_rate(INSTANCES[0], 300, T0))
    assert second is not None and second.time == T0 + 10
    assert second.engines[0].generation_tokens_per_s == pytest.approx(
        gen_rate(INSTANCES[0], 300, T0 + 10))
    assert short is not None and short.engines == []  # 10 s: no row, shown as -
    assert src.window_note(10.0) and "2 \u00d7 scrape interval 10 s" in src.window_note(10.0)
    main_refresh = asked_after  # a refresh alone, once the detail screen closed
    assert asked_focused == 2 + main_refresh + 2  # focus: 2; a refresh + its 2
    assert src.snapshot(300.0) is None  # closed: nothing answered for the other windows


def test_the_fleet_detail_screen_shows_the_other_windows_and_why_one_is_missing():
    sent: list[dict[str, str]] = []
    key = f"{INSTANCES[0]}|m"
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))

    async def go():
        mon = FleetMonitor(cfg, transport=fake_prometheus(sent), clock=lambda: T0 + 3)
        src = FleetSource(mon)
        app = LlmtopApp(src, tui_config(cfg))
        async with app.run_test(size=(140, 60)) as pilot:
            await pilot.pause(0.5)
            app.push_screen(EngineDetailScreen(app.screen.view, key))
            await pilot.pause(0.5)
            lines = screen_lines(app)
            await pilot.press("escape")
            await pilot.pause(0.2)
            return lines, src._focus

    lines, focus_after = asyncio.run(go())
    text = "\n".join(lines)

    def cells(label: str) -> list[str]:
        line = next(ln for ln in lines if ln.strip().startswith(label))
        return line.split()[2:]

    assert all(c == "\u2013" for c in cells("TTFT  10s")[:5]), text
    assert cells("TTFT  1m")[0] != "\u2013", text  # the fleet window (60 s) itself
    five = cells("TTFT  5m")
    assert five[0] != "\u2013" and five != cells("TTFT  1m"), text  # its own buckets
    assert "10s: 10 s < 2 \u00d7 scrape interval 10 s" in text
    assert focus_after is None  # leaving the screen stops the extra queries


# ----------------------------------------------------------------------------- real server


class _Recorder(httpx.AsyncBaseTransport):
    """A real transport that keeps the form of every instant query."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[dict[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v1/query"):
            self.sent.append(dict(httpx.QueryParams(request.content.decode())))
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _close(a: float | None, b: float) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def test_the_5m_row_equals_the_servers_promql_over_5m(fleet_backend, demo_fleet, promql):
    url = fleet_backend.url
    tr = _Recorder()
    cfg = Config(prometheus=PrometheusConfig(url=url, window_s=20.0,
                                             params=latency_params(fleet_backend.kind)))

    async def go():
        mon = FleetMonitor(cfg, transport=tr)
        try:
            snap = await mon.tick()
            rows = [r for r in snap.engines if r.engine == "vllm" and r.state == "ok"
                    and r.generation_tokens_per_s]
            n = len(tr.sent)
            got = {r.key: await mon.row_windows(r.key, (1.5, 20.0, 300.0)) for r in rows}
            return mon, snap, rows, got, tr.sent[n:]
        finally:
            await mon.aclose()

    mon, snap, rows, got, asked = asyncio.run(go())
    assert mon.error is None and mon.scrape_interval_s == 1.0 and rows
    assert len(asked) <= 3 * len(rows), [len(f["query"]) for f in asked]
    compared = 0
    for row in rows:
        inst, model = row.labels["instance"], row.model
        pin = f'server="",instance="{inst}",model_name="{model}"'
        w = got[row.key]
        assert w[1.5] is None  # 1.5 s < 2 x 1 s: no rate, no made-up 0
        assert w[20.0] is next(r for r in snap.engines if r.key == row.key)
        five = w[300.0]
        assert five is not None and five.key == row.key
        gen = promql(url, f"sum(rate(vllm:generation_tokens_total{{{pin}}}[300s]))",
                     snap.time)
        assert gen and _close(five.generation_tokens_per_s, float(gen[0]["value"][1])), row.key
        mean = promql(url, f"sum(rate(vllm:e2e_request_latency_seconds_sum{{{pin}}}"
                      f"[300s])) / sum(rate(vllm:e2e_request_latency_seconds_count{{{pin}}}"
                      "[300s]))", snap.time)
        if mean and five.e2e_s is not None and five.e2e_s.mean is not None:
            assert _close(five.e2e_s.mean, float(mean[0]["value"][1])), row.key
        for q, phi in (("p50", 0.5), ("p95", 0.95)):
            want = promql(url, f"histogram_quantile({phi}, sum by (le) (rate("
                          f"vllm:time_to_first_token_seconds_bucket{{{pin}}}[300s])))",
                          snap.time)
            qs = five.ttft_s
            if not want or math.isnan(float(want[0]["value"][1])) or qs is None:
                continue
            if q in qs.below:  # llmtop shows "<bound"; PromQL interpolates from 0 inside it
                assert getattr(qs, q) >= float(want[0]["value"][1])
                continue
            assert _close(getattr(qs, q), float(want[0]["value"][1])), (row.key, q)
            compared += 1
    assert compared >= 1, fleet_backend.kind
    for form in asked:  # every query at the snapshot's time, pinned to one row
        assert float(form["time"]) == snap.time
        assert all('instance="' in s for s in _selectors(form["query"])), form["query"]
        assert set(re.findall(r"\[(\d+)s\]", form["query"])) <= {"300"}
