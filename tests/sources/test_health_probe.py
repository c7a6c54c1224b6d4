"""``Scraper.health``: one GET of an engine's health endpoint against loopback servers, with
the scrape's timeout and API key; every bad answer gives a clear ``health_status``, never a
traceback. ``Scraper.health_url``: which path each engine is asked on (``sources.health``)."""

from __future__ import annotations

import asyncio
import dataclasses

from aiohttp import web

from llmtop.config import Config, Target
from llmtop.history.store import Store
from llmtop.sources.health import health_status, is_health_url
from llmtop.sources.scrape import Scraper
from llmtop.targets import parse_target

from .helpers import free_port, http_server, raw_server

KEY = "sk-health-secret"


async def _ask(port: int, *, timeout_s: float = 2.0, api_key: str | None = None):
    t = parse_target(f"vllm@127.0.0.1:{port}", timeout_s=timeout_s)
    s = Scraper(Config(targets=(t,), api_key=api_key))
    try:
        url = s.health_url(t, "vllm")
        assert url == f"http://127.0.0.1:{port}/health"
        return await s.health(t, url)
    finally:
        await s.aclose()


async def test_each_answer_gives_a_clear_state_and_the_key_is_sent_never_kept():
    hits: list[str | None] = []

    def answer(status: int, body: str = "", ctype: str = "text/plain"):
        async def h(request: web.Request) -> web.Response:
            hits.append(request.headers.get("Authorization"))
            return web.Response(status=status, text=body, content_type=ctype)
        return h

    cases = {
        200: answer(200),  # vLLM: 200, empty body
        503: answer(503, '{"error": "unhealthy", "error_type": "healthcheck"}',
                    "application/json"),  # TGI's unhealthy answer
    }
    for code, handler in cases.items():
        async with http_server({"/health": handler}) as port:
            raw = await _ask(port, api_key=KEY)
        assert health_status(raw) == code and raw.body is None
        assert KEY not in repr(raw)
    assert hits == [f"Bearer {KEY}"] * 2
    async with http_server({"/health": answer(200, "<!doctype html><html></html>",
                                              "text/html")}) as port:
        raw = await _ask(port)  # a page: the code still counts, the body is dropped
    assert (raw.status, health_status(raw), raw.body) == ("bad_payload", 200, None)


async def test_hanging_garbage_and_down_are_clear_states():
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    async with http_server({"/health": hang}) as port:
        raw = await _ask(port, timeout_s=0.3)
        release.set()
    assert health_status(raw) == "timeout"

    async def garbage(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await r.readline()
        w.write(b"\x00\x01 not http at all\r\n\r\n")
        await w.drain()

    async with raw_server(garbage) as port:
        raw = await _ask(port)
    assert health_status(raw) == "down" and "HTTP" in (raw.error or "")
    raw = await _ask(free_port())
    assert health_status(raw) == "down"


def test_health_url_per_engine():
    s = Scraper(Config())
    t = parse_target("127.0.0.1:8000")
    assert s.health_url(t, "sglang") == "http://127.0.0.1:8000/health"
    assert s.health_url(t, "ollama") is None and s.health_url(t, None) is None
    metrics = parse_target("triton@127.0.0.1:8002")
    assert s.health_url(metrics, "triton") is None  # the metrics port: HTTP port unknown
    http = parse_target("triton@127.0.0.1:8000")
    assert s.health_url(http, "triton") is None  # its metrics not found elsewhere yet
    s._state[http.name] = dataclasses.replace(
        s._state.get(http.name) or _state(), metrics_url="http://127.0.0.1:8002/metrics")
    assert s.health_url(http, "triton") == "http://127.0.0.1:8000/v2/health/ready"


def _state():
    from llmtop.sources.scrape import _State

    return _State()


def test_health_answers_never_touch_the_metrics_state():
    assert is_health_url("http://h:1/health") and is_health_url("http://h:1/v2/health/ready")
    assert not is_health_url("http://h:1/metrics")
    t = Target(name="e", base_url="http://127.0.0.1:9", host="127.0.0.1", port=9)
    store = Store(Config(targets=(t,)))
    from llmtop.model import RawScrape

    store.ingest(RawScrape(target="e", url="http://127.0.0.1:9/health", t_wall=1.0,
                           t_mono=1.0, status="down", error="connection refused",
                           kind="health"))
    [row] = store.snapshot(10.0).engines
    assert row.state == "stale" and row.error == "no data yet"  # not "down": /metrics unasked
