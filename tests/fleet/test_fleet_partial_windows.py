"""A partial answer to the detail screen's window queries (``pinned.row_windows``) is never
shown as complete: the window it fed is in ``Windows.partial`` with the backend's warning,
and the detail screen marks that window's rows ``PARTIAL`` and says why in words. Complete
answers are not marked.

The envelopes are the recorded ones of ``fixtures/``: Thanos' ``warnings`` (a StoreAPI
down) and the VictoriaMetrics cluster's ``"isPartial": true``, put on the answers of the
fake server of ``test_fleet_detail_windows`` for the queries of one window only.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from llmtop.cli.fleet import tui_config
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.pinned import Windows
from llmtop.ui.app import LlmtopApp
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.source import FleetSource
from llmtop.ui.textshot import screen_lines

from .test_fleet_detail_windows import INSTANCES, T0, fake_prometheus, gen_rate

FIXTURES = Path(__file__).parent / "fixtures"
KEY = f"{INSTANCES[0]}|m"


def _envelope(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())["response"]["body"]


THANOS = _envelope("thanos-query-partial-warnings.json")
VICTORIA = _envelope("victoriametrics-cluster-query-partial.json")
THANOS_WARNING = THANOS["warnings"][0]
VICTORIA_WARNING = "the server answered with partial data (isPartial)"


def thanos(body: dict) -> dict:
    """``body`` as a Thanos querier answers when a StoreAPI is down: 200 + ``warnings``."""
    return {**body, "warnings": list(THANOS["warnings"])}


def victoria(body: dict) -> dict:
    """``body`` as a VictoriaMetrics cluster answers when a vmstorage is down."""
    assert VICTORIA["isPartial"] is True
    return {"status": body["status"], "isPartial": True, "data": body["data"]}


def partial_server(sent: list[dict[str, str]], make: Callable[[dict], dict],
                   when: Callable[[str], bool]) -> httpx.MockTransport:
    """The fake server of ``test_fleet_detail_windows``; an instant query for which
    ``when(query)`` holds is answered partially, in ``make``'s envelope."""
    inner = fake_prometheus(sent)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v1/query_range"):
            return _range(request)
        resp = inner.handler(request)
        if not request.url.path.endswith("/api/v1/query"):
            return resp
        query = dict(httpx.QueryParams(request.content.decode()))["query"]
        return httpx.Response(200, json=make(resp.json())) if when(query) else resp

    def _range(request: httpx.Request) -> httpx.Response:
        """A matrix: the instant answer at each step from ``start`` to ``end``."""
        form = dict(httpx.QueryParams(request.content.decode()))
        start, end, step = (float(form[k]) for k in ("start", "end", "step"))
        series: dict[str, dict] = {}
        t = start
        while t <= end + 1e-9:
            at = httpx.Request("POST", str(request.url).replace("query_range", "query"),
                               data={"query": form["query"], "time": repr(t)})
            for item in inner.handler(at).json()["data"]["result"]:
                s = series.setdefault(json.dumps(item["metric"], sort_keys=True),
                                      {"metric": item["metric"], "values": []})
                s["values"].append(item["value"])
            t += step
        body = {"status": "success",
                "data": {"resultType": "matrix", "result": list(series.values())}}
        return httpx.Response(200, json=make(body) if when(form["query"]) else body)

    return httpx.MockTransport(handler)


def over(seconds: int) -> Callable[[str], bool]:
    """The queries whose rates are over ``seconds``."""
    return lambda q: f"[{seconds}s]" in q


def never(_q: str) -> bool:
    return False


def _windows(make: Callable[[dict], dict], when: Callable[[str], bool],
             windows: tuple[float, ...] = (10.0, 60.0, 300.0)):
    sent: list[dict[str, str]] = []

    async def go():
        cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
        mon = FleetMonitor(cfg, transport=partial_server(sent, make, when),
                           clock=lambda: T0 + 3)
        await mon.tick()
        got = await mon.row_windows(KEY, windows)
        await mon.aclose()
        return mon, got

    return asyncio.run(go())


@pytest.mark.parametrize(("make", "warning"), [(thanos, THANOS_WARNING),
                                               (victoria, VICTORIA_WARNING)],
                         ids=["thanos", "victoriametrics"])
def test_a_partial_window_answer_is_marked_with_the_backends_warning(make, warning):
    mon, got = _windows(make, over(300))
    assert isinstance(got, Windows)
    assert not mon.partial  # the refresh itself was complete
    assert got.partial == {300.0: [warning]}  # only the window whose queries were partial
    five = got[300.0]
    assert five is not None and five.generation_tokens_per_s == pytest.approx(
        gen_rate(INSTANCES[0], 300, T0))  # what did come is shown, marked
    assert got[60.0] is not None and got[10.0] is None


@pytest.mark.parametrize("make", [thanos, victoria])
def test_complete_answers_are_not_marked(make):
    mon, got = _windows(make, never)
    assert not mon.partial and got.partial == {}
    assert got[300.0] is not None and got[60.0] is not None
    assert got == {10.0: None, 60.0: got[60.0], 300.0: got[300.0]}  # still a plain mapping


def test_a_partial_refresh_marks_the_fleet_windows_row_too():
    """The fleet window's row is the refresh's own: a partial refresh marks it, with the
    refresh's warning (not the header's PARTIAL line)."""
    mon, got = _windows(thanos, lambda q: True)
    assert mon.partial and mon.warnings[0].startswith("PARTIAL:")
    assert got.partial == {60.0: [THANOS_WARNING], 300.0: [THANOS_WARNING]}


def test_a_partial_answer_that_lost_the_row_is_still_marked():
    """A store down can drop the instance from the answer: the window shows - and says it
    was partial, rather than looking like an idle engine."""
    def drop(body: dict) -> dict:
        return victoria({**body, "data": {**body["data"], "result": []}})

    _mon, got = _windows(drop, over(300))
    assert got[300.0] is None and got.partial == {300.0: [VICTORIA_WARNING]}


# ----------------------------------------------------------------------------- history


def _history(make: Callable[[dict], dict], when: Callable[[str], bool]):
    """One refresh, then the row's sparkline history through ``FleetSource._backfill``:
    (the history, the source's events)."""
    sent: list[dict[str, str]] = []

    async def go():
        cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
        mon = FleetMonitor(cfg, transport=partial_server(sent, make, when),
                           clock=lambda: T0 + 3)
        src = FleetSource(mon)
        await src.tick()
        past = await mon.history(KEY, 6)
        await src._backfill(KEY)
        await mon.aclose()
        return past, src.events()

    return asyncio.run(go())


@pytest.mark.parametrize(("make", "warning"), [(thanos, THANOS_WARNING),
                                               (victoria, VICTORIA_WARNING)],
                         ids=["thanos", "victoriametrics"])
def test_a_partial_history_says_so_with_the_backends_warning(make, warning):
    past, events = _history(make, lambda q: True)
    assert len(past) == 6 and all(r is not None for _, r in past)  # what came is kept
    assert past.partial and past.warnings == [warning]
    (ev,) = [e for e in events if "PARTIAL" in e.text]
    assert ev.level == "warn" and ev.target == INSTANCES[0]
    assert "sparkline history from a PARTIAL answer" in ev.text and warning[:30] in ev.text


def test_a_complete_history_is_not_marked():
    past, events = _history(thanos, never)
    assert len(past) == 6 and not past.partial and past.warnings == []
    assert not any("PARTIAL" in e.text for e in events)


# ----------------------------------------------------------------------------- screen


def _detail(make: Callable[[dict], dict], when: Callable[[str], bool],
            size: tuple[int, int]) -> list[str]:
    sent: list[dict[str, str]] = []
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))

    async def go():
        mon = FleetMonitor(cfg, transport=partial_server(sent, make, when),
                           clock=lambda: T0 + 3)
        app = LlmtopApp(FleetSource(mon), tui_config(cfg))
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.5)
            app.push_screen(EngineDetailScreen(app.screen.view, KEY))
            await pilot.pause(0.5)
            return screen_lines(app)

    return asyncio.run(go())


def _row(lines: list[str], label: str) -> str:
    return next(ln for ln in lines if re.match(rf"\s*{label}\b", ln))


@pytest.mark.parametrize(("make", "warning"), [(thanos, THANOS_WARNING),
                                               (victoria, VICTORIA_WARNING)],
                         ids=["thanos", "victoriametrics"])
def test_the_detail_screen_marks_the_partial_window_in_words(make, warning):
    lines = _detail(make, over(300), (120, 80))
    text = "\n".join(lines)
    five = _row(lines, "TTFT  5m PARTIAL")
    assert five.split()[3] != "\u2013", text  # its values are shown, and marked
    one = _row(lines, "TTFT  1m")
    assert "PARTIAL" not in one  # the complete window is not marked
    note = next(ln for ln in lines if "5m PARTIAL:" in ln)
    assert "partial, values may be incomplete" in note
    assert warning[:30] in text.replace("\n", " ")
    head = lines[lines.index(_row(lines, "Request phases")) + 1]
    assert head.split() == ["10s", "1m", "5m", "PARTIAL", "lifetime"]  # the phases' columns
    assert "PARTIAL" not in lines[0]  # the refresh itself was complete: no header badge


def test_the_mark_fits_80x24():
    lines = _detail(thanos, over(300), (80, 24))
    five = _row(lines, "TTFT  5m PARTIAL")
    assert len(five.split()) == 3 + 6, "\n".join(lines)  # label + 6 cells on one line


def test_a_complete_detail_screen_has_no_mark():
    lines = _detail(thanos, never, (120, 80))
    assert not any("PARTIAL" in ln for ln in lines), "\n".join(lines)
    assert _row(lines, "TTFT  5m").split()[2] != "\u2013"
