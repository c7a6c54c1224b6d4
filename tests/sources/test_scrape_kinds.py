"""Every ``RawScrape`` the scraper makes says what it is (``RawScrape.kind``), answered or
not: consumers dispatch on it, never on the URL."""

from __future__ import annotations

from aiohttp import web

from llmtop.config import Config, Target
from llmtop.model import SCRAPE_HEALTH, SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_WORKERS
from llmtop.sources.scrape import Scraper
from tests.sources.helpers import free_port, http_server


def _target(port: int) -> Target:
    base = f"http://127.0.0.1:{port}"
    return Target(name="e", base_url=base, api_url=base, engine="vllm", host="127.0.0.1",
                  port=port, timeout_s=1.0)


async def _all_kinds(t: Target) -> dict[str, str]:
    s = Scraper(Config(targets=(t,)))
    try:
        got = [await s.scrape(t), await s.slots(t), await s.workers(t),
               await s.health(t, t.base_url + "/health")]
    finally:
        await s.aclose()
    return {raw.kind: raw.status for raw in got}


async def test_each_fetch_says_its_kind():
    async def text(_req: web.Request) -> web.Response:
        return web.Response(text="vllm:num_requests_running 1\n", content_type="text/plain")

    async def slots(_req: web.Request) -> web.Response:
        return web.json_response([{"id": 0, "is_processing": False}])

    async def workers(_req: web.Request) -> web.Response:
        return web.json_response({"workers": []})

    routes = {"/metrics": text, "/slots": slots, "/workers": workers, "/health": text}
    async with http_server(routes) as port:
        got = await _all_kinds(_target(port))
    assert got == {SCRAPE_METRICS: "ok", SCRAPE_SLOTS: "ok", SCRAPE_WORKERS: "ok",
                   SCRAPE_HEALTH: "ok"}


async def test_a_failed_fetch_keeps_its_kind():
    got = await _all_kinds(_target(free_port()))
    assert got == {SCRAPE_METRICS: "down", SCRAPE_SLOTS: "down", SCRAPE_WORKERS: "down",
                   SCRAPE_HEALTH: "down"}
