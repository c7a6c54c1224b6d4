"""``Monitor.prefetch``: the first tick's scrapes (and a blocking GPU sampler's first sample)
start in a thread before the UI is imported; the first tick shows them without asking again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmtop.config import Config, Target
from llmtop.monitor import Monitor
from tests.conftest import fixture_text
from tests.history.fakes import gpu_sample
from tests.monitor_fakes import FakeSamplerBase

BODY = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt").encode()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        server = self.server
        if self.path == "/metrics":
            server.metrics_gets += 1  # type: ignore[attr-defined]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def engine() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.metrics_gets = 0  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _target(srv: ThreadingHTTPServer) -> Target:
    port = srv.server_address[1]
    return Target(f"vllm@127.0.0.1:{port}", f"http://127.0.0.1:{port}", engine="vllm")


class BlockingSampler(FakeSamplerBase):
    """A sampler like NVML's: ``sample()`` blocks and is called from a thread."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def sample(self):
        self.calls.append(threading.current_thread().name)
        return gpu_sample(1.0, utils=(0.25,))

    def close(self) -> None:
        return None


def _monitor(targets: tuple[Target, ...], gpu=None) -> Monitor:
    from llmtop.sources.scrape import Scraper

    cfg = Config(targets=targets, interval_s=5.0)
    return Monitor(cfg, scraper=Scraper(cfg, defer_identity=True), gpu_sampler=gpu)


async def test_the_first_tick_shows_the_prefetched_scrape_without_asking_again(engine):
    gpu = BlockingSampler()
    mon = _monitor((_target(engine),), gpu)
    mon.prefetch()
    try:
        mon._prefetch.result(timeout=30)  # the thread's scrape and sample, before any tick
        assert engine.metrics_gets == 1 and len(gpu.calls) == 1
        snap = await mon.tick()
        assert [r.state for r in snap.engines] == ["ok"]
        assert snap.engines[0].running is not None  # gauges from the first scrape
        assert engine.metrics_gets == 1  # the prefetch's GET only: the tick did not scrape
        assert len(gpu.calls) == 1 and gpu.calls[0] != "MainThread"  # not again, off the loop
        assert [g.util for g in snap.gpus] == [0.25]
        await mon.tick()
        assert engine.metrics_gets == 2  # later ticks scrape as before
    finally:
        await mon.aclose()


async def test_a_down_target_in_the_prefetch_is_down_on_the_first_tick():
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mon = _monitor((Target(f"vllm@127.0.0.1:{port}", f"http://127.0.0.1:{port}",
                           engine="vllm"),))
    mon.prefetch()
    try:
        snap = await mon.tick()
        assert [r.state for r in snap.engines] == ["down"]
    finally:
        await mon.aclose()


async def test_prefetch_without_targets_or_after_a_tick_does_nothing(engine):
    mon = _monitor(())
    mon.prefetch()
    assert not mon._prefetch.pending
    await mon.aclose()
    mon = _monitor((_target(engine),))
    try:
        await mon.tick()
        mon.prefetch()  # too late: ticks scrape themselves
        assert not mon._prefetch.pending
        assert engine.metrics_gets == 1
    finally:
        await mon.aclose()
