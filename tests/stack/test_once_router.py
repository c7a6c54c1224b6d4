"""``llmtop --once ROUTER`` alone lists the router and its backends' engine rows (the
backends come through ``rediscover.backend_targets``), as JSON and as plain text."""

from __future__ import annotations

import io
import json

from aiohttp import web

from llmtop.config import Config
from llmtop.history.store import Store
from llmtop.monitor import Monitor
from llmtop.once import run_once
from tests.conftest import fixture_text
from tests.history.fakes import gpu_sample
from tests.monitor_fakes import FakeSamplerBase
from tests.test_once import serve

from .build import engine_pair, scaled, target


def _engine(kind):
    bodies = engine_pair(kind)
    n = {"i": 0}

    async def handler(request):
        if request.path != "/metrics":
            return web.Response(status=404)
        n["i"] += 1
        return web.Response(text=bodies[min(n["i"], 2) - 1])

    return handler


def _router(ports):
    text = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt")
    urls = {"127.0.0.1:8001": f"127.0.0.1:{ports[0]}", "127.0.0.1:8002": f"127.0.0.1:{ports[1]}"}
    n = {"i": 0}

    async def handler(request):
        n["i"] += 1
        return web.Response(text=scaled(text, float(n["i"]), urls))

    return handler


class Gpu(FakeSamplerBase):
    def sample(self):
        import time

        return gpu_sample(time.monotonic(), error="no GPU in this test")

    def close(self):
        pass


def _monitor(cfg):
    from llmtop.sources.scrape import Scraper

    return Monitor(cfg, scraper=Scraper(cfg), gpu_sampler=Gpu(), store=Store(cfg))


def _run(as_json):
    with serve(_engine("calm")) as pa, serve(_engine("queueing")) as pb, \
            serve(_router((pa, pb))) as pr:
        cfg = Config(targets=(target(f"127.0.0.1:{pr}", pr),), discover=False)
        out, err = io.StringIO(), io.StringIO()
        rc = run_once(cfg, window_s=0.3, as_json=as_json, monitor=_monitor(cfg), out=out,
                      err=err)
    return rc, out.getvalue(), err.getvalue(), (pa, pb, pr)


def test_once_json_router_alone_brings_its_backends():
    rc, out, err, (pa, pb, pr) = _run(True)
    assert rc == 0, err
    doc = json.loads(out)
    [r] = doc["routers"]
    assert r["engine"] == "vllm-router" and r["target"] == f"127.0.0.1:{pr}"
    assert {b["target"] for b in r["backends"]} == {f"127.0.0.1:{pa}", f"127.0.0.1:{pb}"}
    rows = {e["target"]: e for e in doc["engines"]}
    assert set(rows) == {f"127.0.0.1:{pa}", f"127.0.0.1:{pb}"}
    assert all(e["router"] == r["target"] and e["state"] == "ok" for e in rows.values())
    assert all(e["engine"] == "vllm" for e in rows.values())


def test_once_text_shows_router_and_backends():
    rc, out, err, (pa, _pb, pr) = _run(False)
    assert rc == 0, err
    assert f"router 127.0.0.1:{pr} (vllm-router, policy round_robin)" in out
    assert f"backend http://127.0.0.1:{pa} → 127.0.0.1:{pa}" in out
    assert "routed 50% of requests" in out
