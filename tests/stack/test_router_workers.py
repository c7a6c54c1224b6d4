"""sglang-router's roles per worker: its metrics name none per URL, its ``GET /workers`` on the
serving port does (real 0.3.2 answer); polled beside the scrape when discovery knows the port."""

from __future__ import annotations

import json

from sources.helpers import fake_proc, proc_row

from llmtop.config import Config, Target
from llmtop.discovery.search import discover
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.sources.router_workers import reduce_workers, roles_of
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase

from .build import feed, store_with, target

REAL = fixture_text("routers/real/sglang-router-pd-workers.json").split("\n", 1)[1]
PD = fixture_text("routers/real/sglang-router-pd.txt")
A, B = "http://127.0.0.1:41235", "http://127.0.0.1:35871"  # prefill, decode in the capture
REAL_A, REAL_B = "http://127.0.0.1:34417", "http://127.0.0.1:38201"  # in the /workers answer


def test_reduce_the_real_answer_to_roles():
    assert roles_of(reduce_workers(REAL)) == {REAL_A: "prefill", REAL_B: "decode"}
    regular = REAL.replace('"worker_type":"decode"', '"worker_type":"regular"')
    assert json.loads(reduce_workers(regular))[REAL_B] is None  # outside P/D: no role
    for bad in ("", "<html>x</html>", '{"error":"x"}', "[1,2]", '{"workers":3}', "{" * 5000):
        assert reduce_workers(bad) is None
    assert roles_of(None) == {} and roles_of("[") == {}


def _workers_raw(body, status="ok"):
    return RawScrape(target="router", url="http://127.0.0.1:30000/workers", t_wall=1.7e9,
                     t_mono=0.5, status=status, body=body, kind="workers")


def _roles(store):
    [r] = store.snapshot(30.0).routers
    return {b.url: b.role for b in r.backends}


def _answer(a, b):
    return reduce_workers(REAL.replace(REAL_A, a).replace(REAL_B, b))


def test_router_rows_take_roles_from_the_worker_list():
    s = store_with(target("router", 29000, "sglang-router"))
    feed(s, "router", 0.0, PD)
    assert _roles(s) == {A: None, B: None}  # the metrics alone: per pool, not per URL
    s.ingest(_workers_raw(_answer(A, B)))
    assert _roles(s) == {A: "prefill", B: "decode"}
    s.ingest(_workers_raw(None, status="down"))  # a failed poll keeps what was known
    assert _roles(s) == {A: "prefill", B: "decode"}
    [t] = s.snapshot(30.0).routers
    assert t.state == "ok"  # the side poll never touches the router's scrape state


async def test_monitor_polls_workers_only_with_a_serving_url(monkeypatch):
    from llmtop import clock

    monkeypatch.setattr(clock, "monotonic", lambda: 1000.0)  # every tick within the throttle
    calls = []

    class Scraper(FakeScraperBase):
        async def scrape(self, t):
            return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1.7e9,
                             t_mono=1.0, status="ok", body=PD, engine_hint="sglang-router")

        async def workers(self, t):
            calls.append(t.name)
            return RawScrape(target=t.name, url=t.api_url + "/workers", t_wall=1.7e9,
                             t_mono=1.0, status="ok", body=_answer(A, B), kind="workers")

        async def identify(self, t):
            return {}

        async def aclose(self):
            return None

    with_api = Target(name="r1", base_url="http://127.0.0.1:29000", engine="sglang-router",
                      api_url="http://127.0.0.1:30000")
    without = Target(name="r2", base_url="http://127.0.0.1:29001", engine="sglang-router")
    mon = Monitor(Config(targets=(with_api, without)), scraper=Scraper(), gpu_sampler=None)
    await mon.tick()
    snap = await mon.tick()  # the poll starts once the engine is known, lands the next tick
    roles = {r.target: {b.url: b.role for b in r.backends} for r in snap.routers}
    assert roles["r1"] == {A: "prefill", B: "decode"}
    assert roles["r2"] == {A: None, B: None}
    assert set(calls) == {"r1"}
    for _ in range(5):  # refreshes within WORKERS_EVERY_S ask no more; the roles stay
        snap = await mon.tick()
    assert calls == ["r1"]
    assert {b.url: b.role for b in snap.routers[0].backends} == {A: "prefill", B: "decode"}
    await mon.aclose()


async def test_discovery_gives_a_local_router_its_serving_url(tmp_path):
    root = fake_proc(tmp_path, {30: (["python", "-m", "sglang_router.launch_router",
                                      "--port", "18010", "--prometheus-port", "18011"],
                                     [1, 2])},
                     [proc_row("0100007F:465A", "0A", 1), proc_row("0100007F:465B", "0A", 2)])
    [t] = await discover(Config(), ports=(), proc_root=root, timeout_s=0.5)
    assert (t.port, t.engine, t.api_url) == (18011, "sglang-router", "http://127.0.0.1:18010")


async def test_discovery_pairs_the_ports_of_a_router_that_renamed_its_process(tmp_path):
    """sglang-router 0.3.2 sets its process title to ``sglang::router`` (no flags left in
    /proc/<pid>/cmdline, seen on this machine): its two listening ports are the pair, and the
    probe keeps the one serving metrics (the serving port answers /metrics with 404)."""
    from aiohttp import web
    from sources.helpers import http_server

    async def metrics(_req):
        return web.Response(text=PD)

    async def workers(_req):
        return web.Response(text=REAL, content_type="application/json")

    async with http_server({"/metrics": metrics}) as mport, \
            http_server({"/workers": workers}) as port:
        root = fake_proc(tmp_path, {31: (["sglang::router"], [1, 2])},
                         [proc_row(f"0100007F:{mport:04X}", "0A", 1),
                          proc_row(f"0100007F:{port:04X}", "0A", 2)])
        [t] = await discover(Config(), ports=(), proc_root=root, timeout_s=0.5)
    assert (t.port, t.engine, t.api_url) == (mport, "sglang-router", f"http://127.0.0.1:{port}")
