"""The fleet TUI: the overview fed by a FleetMonitor (``ui.source.FleetSource``), with the
header naming the server, the window, LIVE or AT, PARTIAL and error states."""

from __future__ import annotations

import asyncio
import json

import httpx

from llmtop.cli.fleet import tui_config
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.ui.app import LlmtopApp
from llmtop.ui.source import FleetSource
from llmtop.ui.textshot import screen_lines

from .test_bad_input import DATA, DISCOVERY, _fixture, _json, _server


def _lines(transport, **kw) -> tuple[list[str], list[str]]:
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090", **kw))

    async def go():
        app = LlmtopApp(FleetSource(FleetMonitor(cfg, transport=transport)), tui_config(cfg))
        async with app.run_test(size=(140, 24)) as pilot:
            await pilot.pause(0.5)
            overview = screen_lines(app)
            await pilot.press("down", "enter")  # past the model's total row: an instance
            await pilot.pause(0.3)
            return overview, screen_lines(app)

    return asyncio.run(go())


def test_overview_shows_fleet_rows_and_header():
    overview, detail = _lines(_server())
    text = "\n".join(overview)
    assert "prometheus http://127.0.0.1:9090 · window 60s · LIVE" in overview[0]
    assert "engine-1.invalid:8000" in text or ":8000" in text
    assert any(" m " in line and "3" in line for line in overview)  # model m, running 3
    assert "engine-1.invalid:8000" in "\n".join(detail)


def test_at_and_partial_in_the_header():
    def query(request):
        form = dict(httpx.QueryParams(request.content.decode()))
        if "count by (__name__, job)" in form["query"]:
            return _json(DISCOVERY)
        body = json.loads(_fixture("thanos-query-partial-warnings.json").content)
        body["data"] = DATA["data"]
        return _json(body)

    overview, _ = _lines(_server(query=query), at=1_795_600_000.0)
    assert " AT " in overview[0] and "PARTIAL" in overview[0] and "LIVE" not in overview[0]


def test_an_error_is_a_state_in_the_header():
    t = httpx.MockTransport(lambda r: httpx.Response(403, text="forbidden"))
    overview, _ = _lines(t)
    assert "UNAUTHORIZED" in overview[0]


def test_an_unreachable_server_is_named_in_the_verdict_and_the_empty_table():
    """Not the direct mode's "No inference engine found on this machine" hint: the fleet
    server's failure, a CRITICAL verdict, and what to check."""
    def refuse(request):
        raise httpx.ConnectError("[Errno 111] Connection refused")

    overview, _ = _lines(httpx.MockTransport(refuse))
    text = "\n".join(overview)
    assert overview[1].startswith(" NO DATA — UNREACHABLE: cannot reach")
    assert "connection refused" in overview[1]
    assert "--match SELECTOR" in text and "on this machine" not in text


def test_shift_t_travels_in_time_and_back(monkeypatch):
    seen: list[str] = []

    def query(request):
        form = dict(httpx.QueryParams(request.content.decode()))
        seen.append(form["time"])
        return _json(DISCOVERY if "count by (__name__, job)" in form["query"] else DATA)

    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))

    async def go():
        mon = FleetMonitor(cfg, transport=_server(query=query))
        app = LlmtopApp(FleetSource(mon), tui_config(cfg))
        async with app.run_test(size=(140, 24)) as pilot:
            await pilot.pause(0.5)
            live = screen_lines(app)[0]
            await pilot.press("T")
            await pilot.pause(0.2)
            for ch in "1795600000":
                await pilot.press(ch)
            await pilot.press("enter")
            await pilot.pause(0.5)
            past = screen_lines(app)[0]
            await pilot.press("T")
            await pilot.pause(0.2)
            await pilot.press("n", "o", "w", "enter")
            await pilot.pause(0.5)
            return live, past, screen_lines(app)[0], mon.at

    live, past, back, at = asyncio.run(go())
    assert "LIVE" in live and " AT " in past and "LIVE" in back and at is None
    assert "1795600000" in seen  # the queries were evaluated at the asked time


def test_a_rows_sparklines_are_backfilled_once_and_aligned():
    from llmtop.model import EngineRow, Snapshot

    class Diagnoser:
        def take_events(self):
            return []

    class Stub:
        refresh_s = 10.0
        live = True
        totals: list = []
        error = None
        diagnoser = Diagnoser()

        def __init__(self):
            self.asked: list[str] = []
            self.t = 1000.0

        def header_text(self):
            return "stub"

        async def tick(self):
            self.t += 10
            return Snapshot(time=self.t, window_s=60,
                            engines=[EngineRow(key="a|m", target="a", running=9.0)])

        async def history(self, key, points):
            self.asked.append(key)
            return [(t, EngineRow(key=key, target="a", running=t / 100))
                    for t in (970.0, 980.0, 990.0, 1000.0, 1010.0)]

    async def go():
        src = FleetSource(Stub())
        await src.tick()  # t = 1010
        src.series("a|m", "running", 5)      # a trend-arrow read: no backfill
        src.series("a|m", "ttft_p50", 30)    # the sparkline panel: backfill
        await asyncio.sleep(0)
        await src._backfill_task
        src.series("a|m", "ttft_p50", 30)    # asked once only
        return src

    src = asyncio.run(go())
    assert src.monitor.asked == ["a|m"]
    assert src.series("a|m", "running") == [9.7, 9.8, 9.9, 10.0, 9.0]  # live point kept
    assert src.series_times() == [970.0, 980.0, 990.0, 1000.0, 1010.0]
    assert src.series_count() == 5


def test_rows_are_grouped_under_model_totals_and_fold():
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))

    async def go():
        app = LlmtopApp(FleetSource(FleetMonitor(cfg, transport=_server())), tui_config(cfg))
        async with app.run_test(size=(140, 24)) as pilot:
            await pilot.pause(0.5)
            shots = [screen_lines(app)]
            await pilot.press("c")  # the cursor starts on the first model's total row
            await pilot.pause(0.3)
            shots.append(screen_lines(app))
            await pilot.press("enter")  # enter on a total row unfolds it
            await pilot.pause(0.3)
            shots.append(screen_lines(app))
            return shots

    opened, folded, again = asyncio.run(go())

    def rows(lines):
        return [ln for ln in lines if ":8000" in ln or "total (" in ln]

    assert any("▾ total (" in ln for ln in opened)
    heads = [i for i, ln in enumerate(rows(opened)) if "total (" in ln]
    assert heads and heads[0] == 0  # the total row heads its model's instance rows
    assert any(":8000" in ln for ln in rows(opened)[1:])
    assert any("▸ total (" in ln for ln in folded)
    assert len(rows(folded)) < len(rows(opened))  # the model's instance rows are folded
    assert rows(again) == rows(opened)
