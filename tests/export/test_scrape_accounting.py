"""The exporter counts metrics scrapes only: a llama-server's ``/slots`` polls (side polls)
are neither scrapes, nor scrape errors, nor the scrape's duration."""

from __future__ import annotations

import asyncio

from aiohttp import web

from llmtop.config import Config, Target
from llmtop.export.run import direct_store, publish_direct
from llmtop.export.state import ExportState
from llmtop.model import SCRAPE_HEALTH, SCRAPE_SLOTS, SCRAPE_WORKERS, RawScrape
from llmtop.monitor import Monitor
from llmtop.sources.scrape import Scraper
from tests.conftest import fixture_text
from tests.export.test_vs_once import samples
from tests.sources.helpers import http_server

BODY = fixture_text("llamacpp-SYNTHETIC-from-server-context-cpp.txt")
TICKS = 4


def test_slots_polls_are_not_scrapes():
    """A llama-server whose ``/slots`` is disabled (501): as many scrapes as ``/metrics``
    answered, no scrape error, and the duration is the metrics scrape's."""
    hits = {"/metrics": 0, "/slots": 0}

    async def metrics(_req: web.Request) -> web.Response:
        hits["/metrics"] += 1
        return web.Response(text=BODY, content_type="text/plain")

    async def slots(_req: web.Request) -> web.Response:
        hits["/slots"] += 1
        return web.json_response({"error": {"code": 501, "message": "slots disabled"}},
                                 status=501)

    async def go() -> dict:
        async with http_server({"/metrics": metrics, "/slots": slots}) as port:
            t = Target(name=f"llamacpp@127.0.0.1:{port}", base_url=f"http://127.0.0.1:{port}",
                       engine="llamacpp", host="127.0.0.1", port=port)
            config = Config(targets=(t,), discover=False, interval_s=1.0)
            state = ExportState("direct", process_metrics=False)
            mon = Monitor(config, scraper=Scraper(config), store=direct_store(config),
                          sink=state.observe, tick_timeout_s=5.0)
            try:
                for _ in range(TICKS):
                    publish_direct(state, mon, await mon.tick(), 10.0, 0.0)
            finally:
                await mon.aclose()
            return samples(state.render().decode())

    got = asyncio.run(go())
    assert hits["/slots"] >= TICKS - 1  # the side polls did run
    scrapes = {n: v for (n, _), v in got.items() if n == "llmtop_scrapes_total"}
    assert scrapes == {"llmtop_scrapes_total": float(hits["/metrics"])}
    assert not [k for k in got if k[0] == "llmtop_scrape_errors_total"]


def test_observe_counts_metrics_kind_only():
    """Each side-poll kind is left out of the scrape series, whatever its URL."""
    state = ExportState("direct", process_metrics=False)

    def raw(kind: str, status: str, elapsed: float) -> RawScrape:
        return RawScrape(target="e", url="http://127.0.0.1:1/metrics", t_wall=1.0, t_mono=1.0,
                         status=status, elapsed_s=elapsed, kind=kind)

    state.observe(raw("metrics", "ok", 0.01))
    for kind in (SCRAPE_SLOTS, SCRAPE_WORKERS, SCRAPE_HEALTH):
        state.observe(raw(kind, "http_error", 2.0))
    h = state.health
    assert h.scrapes == {"e": 1} and h.scrape_errors == {} and h.scrape_s == {"e": 0.01}
