"""Issue 27: the TUI's probe form offers the shaped loads the CLI has: lengths and prefix
reuse like the selected engine (``--lengths-from`` / ``--prefix-hit-from``) and a dataset
file (``--dataset``), shows what it took before starting, and says when it cannot."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from textual.widgets import Select

from llmtop.config import Config, Target
from llmtop.loadgen.options import ProbeOptions
from llmtop.ui.screens.probe import ProbeScreen
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metrics"
VLLM = "vllm-real-cpu-v0.32.0-under-load.txt"  # real vLLM text: length histograms, prefix
LLAMACPP = "llamacpp-SYNTHETIC-from-server-context-cpp.txt"  # llama.cpp: no histograms


@pytest.fixture
def metrics_server():
    """Serve one fixture file as /metrics on 127.0.0.1 (a free port); yields a setter."""
    body: list[bytes] = [b""]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body[0] if self.path == "/metrics" else b"")

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()

    def serve(name: str) -> int:
        body[0] = (FIXTURES / name).read_bytes()
        return srv.server_address[1]

    try:
        yield serve
    finally:
        srv.shutdown()
        srv.server_close()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


async def _screen(app, pilot, port: int, engine: str = "vllm"):
    started: list[ProbeOptions] = []

    class Handle:
        def poll(self):
            return []

    def starter(opts):
        started.append(opts)
        return Handle()

    await first_paint(app, pilot)
    screen = ProbeScreen(f"{engine}@127.0.0.1:{port}", starter=starter,
                         options_cls=ProbeOptions)
    app.push_screen(screen)
    await pilot.pause()
    return screen, started


def _app(port: int, engine: str = "vllm"):
    cfg = Config(targets=(Target(f"{engine}@127.0.0.1:{port}", f"http://127.0.0.1:{port}",
                                 engine=engine),))
    return make_app(config=cfg)


async def _choose(app, pilot, screen, mode: str) -> str:
    screen.query_one("#pf-load", Select).value = mode
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
    return "\n".join(screen_lines(app))


async def test_lengths_and_prefix_from_the_engine_are_shown_then_sent(metrics_server):
    port = metrics_server(VLLM)
    app = _app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, started = await _screen(app, pilot, port)
        text = await _choose(app, pilot, screen, "lengths+prefix")
        shown = " ".join(text.split())  # the line wraps at 80 columns
        assert f"like vllm@127.0.0.1:{port}, lifetime" in shown, text
        assert "prompt p50" in shown and "output p50" in shown and "/ p95" in shown
        assert "prefix hit" in shown and "%" in shown
        assert "lengths like the engine; prefix hit like the engine" in shown
        await pilot.press("ctrl+r")
        await pilot.pause()
    assert len(started) == 1, screen.status
    tr = started[0].traffic
    assert tr["prompt"]["requests"] > 0 and tr["output"]["requests"] > 0
    assert 0 <= tr["prefix_hit_rate"] <= 1 and tr["window"].startswith("lifetime")
    assert started[0].dataset is None
    started[0].validate()


async def test_an_engine_without_length_histograms_says_so_and_does_not_start(metrics_server):
    port = metrics_server(LLAMACPP)
    app = _app(port, "llamacpp")
    async with app.run_test(size=(80, 24)) as pilot:
        screen, started = await _screen(app, pilot, port, "llamacpp")
        text = " ".join((await _choose(app, pilot, screen, "lengths")).split())
        assert "reports no prompt-length histogram" in text, text
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert not started and "choose another load" in screen.status
        # back to synthetic: starts, nothing from the engine
        await _choose(app, pilot, screen, "synthetic")
        await pilot.press("ctrl+r")
        await pilot.pause()
    assert len(started) == 1 and started[0].traffic is None


async def test_an_engine_that_is_down_says_so():
    port = _closed_port()
    app = _app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, started = await _screen(app, pilot, port)
        text = " ".join((await _choose(app, pilot, screen, "prefix")).split())
        assert f"cannot shape the load like vllm@127.0.0.1:{port}" in text, text
        assert "cannot read metrics" in text
        await pilot.press("ctrl+r")
        await pilot.pause()
    assert not started


async def test_a_dataset_file_is_checked_shown_and_sent(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # typed as a user would, a short relative path
    good = tmp_path / "prompts.jsonl"
    good.write_text('{"prompt": "hello"}\n{"prompt": "world", "max_tokens": 8}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hello"}\nnot json\n')
    port = _closed_port()  # a dataset needs nothing from the engine
    app = _app(port)
    async with app.run_test(size=(80, 24)) as pilot:
        screen, started = await _screen(app, pilot, port)
        await _choose(app, pilot, screen, "dataset")
        assert app.focused is screen.query_one("#pf-dataset")
        await pilot.press(*bad.name)
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = " ".join("\n".join(screen_lines(app)).split())
        assert "line 2" in text, text
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert not started
        screen.query_one("#pf-dataset").value = str(good)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = " ".join("\n".join(screen_lines(app)).split())
        assert "2 prompts in prompts.jsonl, sent as written" in text, text
        await pilot.press("ctrl+r")
        await pilot.pause()
    assert len(started) == 1 and started[0].dataset == str(good)
    assert started[0].traffic is None
    started[0].validate()


@pytest.mark.slow
async def test_the_real_probe_runs_shaped_like_the_demo_vllm():
    """End to end: the demo vLLM's own histograms shape a real probe started from the form."""
    import asyncio

    from llmtop.demo.launcher import start_demo
    from llmtop.loadgen.report import lengths_lines

    demo = start_demo(engines=["vllm"])
    try:
        cfg = demo.apply(Config(discover=False))
        app = make_app(config=cfg)
        async with app.run_test(size=(80, 24)) as pilot:
            await first_paint(app, pilot)
            screen = ProbeScreen(cfg.targets[0].name)
            app.push_screen(screen)
            await pilot.pause()
            for _ in range(40):  # the demo engine fills its histograms from its own traffic
                text = await _choose(app, pilot, screen, "lengths+prefix")
                if screen.traffic is not None:
                    break
                await _choose(app, pilot, screen, "synthetic")
                await asyncio.sleep(0.5)
            assert screen.traffic is not None, text
            for key, value in (("concurrency", "2"), ("duration", "3")):
                screen.query_one(f"#pf-{key}").value = value
            await pilot.press("ctrl+r")
            assert screen.handle is not None, screen.status
            for _ in range(80):
                await asyncio.sleep(0.25)
                await pilot.pause()
                if screen.handle is None:
                    break
            assert screen.report is not None, screen.status
            tr = screen.report["traffic"]
            assert tr["kind"] == "engine" and tr["prompt"] and tr["prefix_hit_rate"] is not None
            assert "Load: shaped like" in lengths_lines(screen.report)[0]
    finally:
        demo.stop()
