"""``llmtop --once``: JSON shape, table, exit codes, against local servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import io
import json
import re
import threading
from contextlib import contextmanager

import pytest
from aiohttp import web

from llmtop.config import Config, Target
from llmtop.errors import GpuRequiredError
from llmtop.history.store import Store
from llmtop.monitor import Monitor
from llmtop.once import NO_TARGETS_MESSAGE, run_once
from tests.conftest import fixture_text
from tests.history.fakes import body, fake_detect, fake_normalize, gpu_sample
from tests.monitor_fakes import FakeSamplerBase

TOP_KEYS = ["llmtop", "time", "window_s", "engines", "routers", "gpus", "gpu_error", "diagnosis"]
ROW_KEYS = [
    "target", "engine", "engine_version", "model", "state", "error", "running", "waiting",
    "waiting_deferred",
    "max_running", "kv_cache_usage", "kv_capacity_tokens", "prefix_hit_rate", "ttft_s",
    "itl_s", "tpot_s", "e2e_s", "queue_s", "prefill_s", "decode_s", "inference_s",
    "prompt_len", "gen_len", "iteration_tokens", "spec_accept_rate", "prompt_tokens_per_s",
    "generation_tokens_per_s",
    "requests_per_s", "preemptions_per_s", "errors_per_s", "finished", "ranks", "lifetime",
    "capacity_used", "capacity", "router", "role", "kv_transfer", "kv_tiers", "tokens_idle_s",
    "container", "health_status", "achieved_flops_per_s", "achieved_read_bytes_per_s",
    "achieved_write_bytes_per_s", "achieved_bytes_per_s", "mbu", "mfu", "gpu_peak", "mfu_hint",
    "log",
]
Q_KEYS = ["p50", "p90", "p95", "p99", "mean", "count", "below", "above"]


@contextmanager
def serve(handler):
    """An aiohttp server on 127.0.0.1:0 in its own thread; yields its port."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box = {}

    async def start():
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["port"] = runner.addresses[0][1]
        ready.set()

    th = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()),
                          daemon=True)
    th.start()
    ready.wait(10)
    try:
        yield box["port"]
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        th.join(10)


def counting_json_handler():
    n = {"i": 0}

    async def handler(request):
        if request.path != "/metrics":
            return web.Response(status=404)
        n["i"] += 1
        i = n["i"]
        text = body(counters={"generation_tokens": 500.0 * i, "requests": 3.0 * i},
                    gauges={"running": 4.0, "waiting": 0.0},
                    hists={"ttft": [[0.1, 0.5, "inf"], [i, 3 * i, 3 * i], 0.5 * i, 3 * i]})
        return web.Response(text=text, content_type="application/json")

    return handler


def fake_monitor(config, *, gpu_error=None):
    from llmtop.sources.scrape import Scraper

    class Gpu(FakeSamplerBase):
        def sample(self):
            import time

            return gpu_sample(time.monotonic(), error=gpu_error)

        def close(self):
            pass

    store = Store(config, normalize=fake_normalize, detect=fake_detect)
    return Monitor(config, scraper=Scraper(config), gpu_sampler=Gpu(), store=store)


def target(port, name=None):
    return Target(name=name or f"127.0.0.1:{port}", base_url=f"http://127.0.0.1:{port}",
                  host="127.0.0.1", port=port, engine="vllm", timeout_s=2.0)


def test_json_shape_rates_and_exit_zero():
    with serve(counting_json_handler()) as port:
        cfg = Config(targets=(target(port),))
        out, err = io.StringIO(), io.StringIO()
        rc = run_once(cfg, window_s=0.3, as_json=True, monitor=fake_monitor(cfg), out=out,
                      err=err)
    assert rc == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    assert list(doc) == TOP_KEYS
    assert 0.25 < doc["window_s"] < 2.0
    [e] = doc["engines"]
    assert list(e) == ROW_KEYS
    assert e["state"] == "ok" and e["engine"] == "vllm" and e["model"] == "m"
    assert e["running"] == 4.0 and e["waiting"] == 0.0
    assert e["kv_cache_usage"] is None  # not reported: null, never 0
    assert e["capacity_used"] is None and e["capacity"] is None  # no profile: null, never 0
    # one scrape per tick: counters advanced by exactly one step over the window, and
    # window_s is the time between this target's two scrapes (exact up to ms rounding)
    # (window_s is rounded to the ms: allow rate x 0.5 ms)
    rate = e["generation_tokens_per_s"]
    assert rate * doc["window_s"] == pytest.approx(500.0, abs=rate * 0.0005 + 1e-6)
    assert list(e["ttft_s"]) == Q_KEYS
    # Δbuckets (1, 3, 3) over (0.1, 0.5, +Inf): p50 rank 1.5 -> 0.1 + 0.4 * 0.5/2
    assert e["ttft_s"]["count"] == 3 and e["ttft_s"]["p50"] == pytest.approx(0.2)
    assert e["ttft_s"]["p99"] == pytest.approx(0.494)  # rank 2.97 -> 0.1 + 0.4 * 1.97/2
    assert e["ttft_s"]["above"] == [] and e["ttft_s"]["below"] == []
    assert e["lifetime"]["ttft_s"]["count"] == 6
    assert doc["gpus"][0]["util"] == 0.5 and doc["gpu_error"] is None


def test_table_output():
    with serve(counting_json_handler()) as port:
        cfg = Config(targets=(target(port, "vllm-a"),))
        out = io.StringIO()
        rc = run_once(cfg, window_s=0.2, monitor=fake_monitor(cfg, gpu_error="no NVML"),
                      out=out, err=io.StringIO())
    text = out.getvalue()
    assert rc == 0
    assert "vllm-a" in text and "TTFT p95" in text and " ok " in text
    assert "GPU unavailable: no NVML" in text
    assert "\u2013" in text  # KV not reported


def test_all_targets_down_exit_one_with_reason():
    with serve(counting_json_handler()) as port:
        pass  # the port is closed now: connection refused
    cfg = Config(targets=(target(port, "gone"),))
    out, err = io.StringIO(), io.StringIO()
    rc = run_once(cfg, window_s=0.0, as_json=True, monitor=fake_monitor(cfg), out=out, err=err)
    assert rc == 1
    doc = json.loads(out.getvalue())
    assert doc["engines"][0]["state"] == "down"
    assert "no target could be read" in err.getvalue() and "gone" in err.getvalue()


def test_one_target_down_one_ok_exit_zero():
    with serve(counting_json_handler()) as port:
        with serve(counting_json_handler()) as dead:
            pass
        cfg = Config(targets=(target(port, "up"), target(dead, "dead")))
        out = io.StringIO()
        rc = run_once(cfg, window_s=0.1, as_json=True, monitor=fake_monitor(cfg), out=out,
                      err=io.StringIO())
    assert rc == 0
    states = {e["target"]: e["state"] for e in json.loads(out.getvalue())["engines"]}
    assert states == {"up": "ok", "dead": "down"}


def test_http_error_and_garbage_states():
    async def h500(request):
        return web.Response(status=503, text="overloaded")

    async def garbage(request):
        return web.Response(text="this is not metrics at all", content_type="text/plain")

    with serve(h500) as p1, serve(garbage) as p2:
        cfg = Config(targets=(target(p1, "h"), target(p2, "g")))
        out = io.StringIO()
        rc = run_once(cfg, window_s=0.0, as_json=True, monitor=fake_monitor(cfg), out=out,
                      err=io.StringIO())
    assert rc == 1
    states = {e["target"]: e["state"] for e in json.loads(out.getvalue())["engines"]}
    assert states == {"h": "http_error", "g": "bad_payload"}


def test_no_targets_found_message(monkeypatch):
    import llmtop.once as once

    async def nothing(config):
        return []

    monkeypatch.setattr(once, "_targets", lambda config, err=None: _async(config))
    err = io.StringIO()
    assert run_once(Config(), err=err) == 1
    assert NO_TARGETS_MESSAGE in err.getvalue()
    assert "Traceback" not in err.getvalue()


async def _async(v):
    return v


def test_gpu_required_raises_clear_error():
    with serve(counting_json_handler()) as port:
        cfg = Config(targets=(target(port),), gpu_required=True)
        with pytest.raises(GpuRequiredError, match="NVML library not found"):
            run_once(cfg, window_s=0.0, monitor=fake_monitor(cfg,
                                                             gpu_error="NVML library not found"),
                     out=io.StringIO(), err=io.StringIO())


def test_cli_once_json_end_to_end_with_real_vllm_adapter(capsys):
    """The whole real path: cli -> settings -> discover-free targets -> Scraper -> registry."""
    pytest.importorskip("llmtop.parse.registry")
    pytest.importorskip("llmtop.settings")
    base = fixture_text("vllm-generated-v0.33.0-loggers.txt")
    m = re.search(r'^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$', base, re.M)
    assert m, "fixture lost its generation counter"
    gen0 = float(m.group(1))
    n = {"i": 0}

    async def handler(request):
        if request.path != "/metrics":
            return web.Response(status=404)
        n["i"] += 1
        text = base.replace(m.group(0), m.group(0).replace(m.group(1),
                                                           f"{gen0 + 1000.0 * n['i']:.1f}"))
        return web.Response(text=text, content_type="text/plain; version=0.0.4")

    from llmtop.cli import main

    with serve(handler) as port:
        rc = main(["--once", "--json", "--window", "0.3", f"vllm@127.0.0.1:{port}"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out)
    [e] = [x for x in doc["engines"]]
    assert e["engine"] == "vllm" and e["state"] == "ok"
    rate = e["generation_tokens_per_s"]
    assert rate * doc["window_s"] == pytest.approx(1000.0, abs=rate * 0.0005 + 1e-6)


def test_table_has_the_cap_column_dash_without_a_profile():
    from llmtop.console.once_table import print_once
    from llmtop.model import EngineRow, Snapshot

    rows = [EngineRow(key="a", target="vllm-a", engine="vllm", state="ok", capacity_used=0.62),
            EngineRow(key="b", target="vllm-b", engine="vllm", state="ok",
                      capacity_used=0.9, capacity_drift=[{"what": "prompt"}]),
            EngineRow(key="c", target="vllm-c", engine="vllm", state="ok")]
    out = io.StringIO()
    print_once(Snapshot(time=0.0, window_s=10.0, engines=rows), file=out)
    lines = out.getvalue().splitlines()
    head = next(ln for ln in lines if "CAP" in ln)
    col = head.index("CAP") + len("CAP")  # right-justified: cells end where the header does
    cells = {ln.split()[0]: ln[col - 4:col].strip() for ln in lines if ln.startswith("vllm-")}
    assert cells == {"vllm-a": "62%", "vllm-b": "90%~", "vllm-c": "\u2013"}
