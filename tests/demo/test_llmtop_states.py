"""End to end: the demo scenarios seen through llmtop's own Scraper and Store give the states
the UI must show (preemptions counted, RESTARTED, DOWN, BAD PAYLOAD)."""

from __future__ import annotations

import asyncio
import importlib
import time

import pytest

from llmtop.config import Config, Target

pytest.importorskip("llmtop.sources.scrape")
pytest.importorskip("llmtop.history.store")

from llmtop.history.store import Store
from llmtop.sources.scrape import Scraper


def _normalize(engine, body, **kw):
    try:
        from llmtop.parse import registry
    except ImportError:  # until parse/registry.py lands: the engine's adapter directly
        return importlib.import_module(f"llmtop.parse.{engine}").normalize(body, **kw)
    return registry.normalize(engine, body, **kw)


async def _watch(server, seconds: float, interval: float = 0.5):
    targets = tuple(Target(name=es.target, base_url=es.base_url, engine=es.kind,
                           host="127.0.0.1", port=es.port, timeout_s=1.0)
                    for es in server.sites)
    cfg = Config(targets=targets, interval_s=interval, timeout_s=1.0, discover=False)
    scraper = Scraper(cfg)
    store = Store(cfg, normalize=_normalize)
    states: list[dict[str, str]] = []
    try:
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            raws = await asyncio.gather(*(scraper.scrape(t) for t in targets))
            for raw in raws:
                store.ingest(raw)
            snap = store.commit(time.monotonic(), time.time())
            states.append({row.target: row.state for row in snap.engines})
            await asyncio.sleep(interval)
        return states, store
    finally:
        await scraper.aclose()


async def test_restart_shows_restarted(demo_factory):
    server = await demo_factory(("vllm",), scenario="restart", background=True,
                                fault_after=2.0, fault_every=600)
    states, _store = await _watch(server, 4.0)
    seen = [s[server.sites[0].target] for s in states]
    assert "ok" in seen and "restarted" in seen


async def test_down_shows_down(demo_factory):
    server = await demo_factory(("vllm", "sglang"), scenario="down", fault_after=1.2,
                                fault_every=600)
    states, _store = await _watch(server, 3.0)
    v, g = (es.target for es in server.sites)
    assert states[0][v] in ("ok", "stale") and states[-1][v] == "down"
    assert states[-1][g] == "ok"


async def test_garbage_shows_bad_payload(demo_factory):
    server = await demo_factory(("vllm",), scenario="garbage")
    states, _store = await _watch(server, 1.2)
    assert states[-1][server.sites[0].target] == "bad_payload"


async def test_slow_shows_down_on_timeout(demo_factory):
    server = await demo_factory(("vllm",), scenario="slow")
    states, _store = await _watch(server, 2.5)
    assert states[-1][server.sites[0].target] == "down"


async def test_kv_pressure_shows_preemptions(demo_factory):
    server = await demo_factory(("vllm",), scenario="kv-pressure", background=True)
    _states, store = await _watch(server, 6.0, interval=1.0)
    snap = store.snapshot(10.0)
    row = snap.engines[0]
    assert row.state == "ok"
    assert row.preemptions_per_s and row.preemptions_per_s > 0
    assert row.kv_cache_usage and row.kv_cache_usage > 0.5


async def test_triton_row_has_token_rates_and_ttft(demo_factory):
    """The demo Triton (TRT-LLM token histograms, first-response histogram) fills the row's
    tok/s and TTFT columns instead of None."""
    server = await demo_factory(("triton",), background=True)
    _states, store = await _watch(server, 4.0)
    row = store.snapshot(10.0).engines[0]
    assert row.state == "ok"
    assert row.generation_tokens_per_s and row.generation_tokens_per_s > 0
    assert row.prompt_tokens_per_s and row.prompt_tokens_per_s > 0
    assert row.ttft_s is not None
