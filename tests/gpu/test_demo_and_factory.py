"""DemoGpuSampler against a tiny local HTTP server; make_sampler and NullSampler."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmtop.config import Config, Target
from llmtop.gpu import NullSampler, make_sampler, reasons
from llmtop.gpu.demo import DemoGpuSampler, record_from_json
from llmtop.gpu.nvml import NvmlSampler

PAYLOAD = {
    "gpus": [
        {
            "host": "demo-box",
            "index": 0,
            "uuid": "GPU-demo-0",
            "name": "Demo H100",
            "util": 0.91,
            "mem_util": 0.4,
            "mem_used_bytes": 70 * 1024**3,
            "mem_total_bytes": 80 * 1024**3,
            "power_w": 612.5,
            "power_limit_w": 700,
            "temp_c": 71,
            "sm_clock_mhz": 1980,
            "sm_clock_max_mhz": 1980,
            "throttle": ["power cap"],
            "processes": [
                {
                    "pid": 4242,
                    "name": "VLLM::EngineCore",
                    "used_bytes": 69 * 1024**3,
                    "engine_target": "vllm@demo",
                },
            ],
            "source": "ignored",
            "some_future_field": 1,
        },
        {"index": 1, "util": None, "throttle": [], "processes": []},
    ]
}


class Server:
    def __init__(self, keep_alive: bool = False):
        self.body: bytes = json.dumps(PAYLOAD).encode()
        self.status = 200
        self.connections = 0
        self.hang_up = False
        """Close each connection after its answer without saying so (a stale keep-alive)."""
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self):
                outer.connections += 1
                super().setup()

            def do_GET(self):
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)
                if outer.hang_up:
                    self.close_connection = True

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/gpus"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def test_demo_sampler_builds_records(server):
    s = DemoGpuSampler(server.url)
    out = s.sample()
    s.close()
    assert out.error is None and out.cost_s is not None
    g0, g1 = out.gpus
    assert (g0.source, g0.host, g0.index, g0.uuid, g0.name) == (
        "demo",
        "demo-box",
        0,
        "GPU-demo-0",
        "Demo H100",
    )
    assert g0.util == 0.91 and g0.mem_used_bytes == 70 * 1024**3
    assert g0.power_limit_w == 700.0 and isinstance(g0.power_limit_w, float)
    assert g0.throttle == ["power cap"]
    (p,) = g0.processes
    assert (p.pid, p.name, p.used_bytes, p.engine_target) == (
        4242,
        "VLLM::EngineCore",
        69 * 1024**3,
        "vllm@demo",
    )
    assert g1.index == 1 and g1.util is None and g1.throttle == [] and g1.host == "demo"
    assert g1.mem_total_bytes is None


def test_demo_sampler_keeps_one_connection_and_survives_its_loss():
    srv = Server(keep_alive=True)
    s = DemoGpuSampler(srv.url)
    try:
        assert [len(s.sample().gpus) for _ in range(3)] == [2, 2, 2]
        assert srv.connections == 1
        srv.hang_up = True  # the next answer closes the kept connection behind our back
        assert len(s.sample().gpus) == 2
        out = s.sample()  # the dead connection is replaced, not reported as an error
        assert out.error is None and len(out.gpus) == 2
        assert srv.connections == 2
    finally:
        s.close()
        srv.close()


def test_demo_sampler_bad_payload(server):
    server.body = b"<html>oops</html>"
    s = DemoGpuSampler(server.url)
    out = s.sample()
    assert out.gpus == [] and out.error == reasons.DEMO_BAD_PAYLOAD
    server.body = b'{"gpus": 3}'
    assert s.sample().error == reasons.DEMO_BAD_PAYLOAD
    s.close()


def test_demo_sampler_http_error(server):
    server.status = 500
    s = DemoGpuSampler(server.url)
    assert s.sample().error == reasons.DEMO_NOT_ANSWERING
    s.close()


def test_demo_sampler_not_answering():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    s = DemoGpuSampler(f"http://127.0.0.1:{port}/gpus", timeout_s=0.5)
    out = s.sample()
    assert out.gpus == [] and out.error == ("GPU unavailable: demo GPU endpoint not answering")
    s.close()


def test_demo_sampler_slow_endpoint_times_out():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # accepts into the backlog, never answers
    try:
        s = DemoGpuSampler(f"http://127.0.0.1:{sock.getsockname()[1]}/", timeout_s=0.2)
        assert s.sample().error == reasons.DEMO_NOT_ANSWERING
        s.close()
    finally:
        sock.close()


def test_record_from_json_ignores_garbage_types():
    r = record_from_json({"index": 2, "util": "high", "mem_used_bytes": True, "processes": [1]})
    assert r.util is None and r.mem_used_bytes is None and r.processes == []


def test_make_sampler_picks_the_demo(server):
    s = make_sampler(Config(), demo_gpu_url=server.url)
    assert isinstance(s, DemoGpuSampler)
    assert s.sample().gpus[0].source == "demo"
    s.close()


def test_make_sampler_default_is_nvml_with_targets():
    t = Target(name="a", base_url="http://127.0.0.1:8000", port=8000)
    s = make_sampler(Config(targets=(t,)))
    assert isinstance(s, NvmlSampler)
    out = s.sample()  # on a machine without NVIDIA driver: one line, no exception
    assert out.error is None or out.error.startswith("GPU unavailable: ")
    s.close()


def test_null_sampler():
    s = NullSampler("GPU sampling disabled (--no-gpu)")
    out = s.sample()
    assert out.gpus == [] and out.error == "GPU sampling disabled (--no-gpu)"
    s.close()


# -- sample_async: the same answers on the event loop, over the lean transport -----------


def sample_once_async(s: DemoGpuSampler):
    """One ``sample_async`` in a fresh event loop, then ``aclose``."""

    async def go():
        try:
            return await s.sample_async()
        finally:
            await s.aclose()

    return asyncio.run(go())


def test_demo_sampler_async_gives_what_the_thread_path_gives(server):
    s = DemoGpuSampler(server.url)
    a = sample_once_async(s)
    b = s.sample()
    s.close()
    assert a.error is None and a.cost_s is not None
    assert a.gpus == b.gpus and len(a.gpus) == 2


def test_demo_sampler_async_keeps_one_connection_and_survives_its_loss():
    srv = Server(keep_alive=True)
    s = DemoGpuSampler(srv.url)

    async def go():
        counts = [len((await s.sample_async()).gpus) for _ in range(3)]
        assert srv.connections == 1
        srv.hang_up = True
        counts.append(len((await s.sample_async()).gpus))
        out = await s.sample_async()  # the dead connection is replaced silently
        await s.aclose()
        return counts, out

    try:
        counts, out = asyncio.run(go())
        assert counts == [2, 2, 2, 2]
        assert out.error is None and len(out.gpus) == 2
        assert srv.connections == 2
    finally:
        srv.close()


@pytest.mark.parametrize("status,body,error", [
    (200, b"<html>oops</html>", reasons.DEMO_BAD_PAYLOAD),
    (200, b'{"gpus": 3}', reasons.DEMO_BAD_PAYLOAD),
    (500, b"{}", reasons.DEMO_NOT_ANSWERING),
])
def test_demo_sampler_async_bad_answers(server, status, body, error):
    server.status, server.body = status, body
    out = sample_once_async(DemoGpuSampler(server.url))
    assert out.gpus == [] and out.error == error


def test_demo_sampler_async_not_answering_and_slow():
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    slow = socket.socket()
    slow.bind(("127.0.0.1", 0))
    slow.listen()  # accepts into the backlog, never answers

    try:
        for url in (f"http://127.0.0.1:{port}/gpus",
                    f"http://127.0.0.1:{slow.getsockname()[1]}/gpus"):
            out = sample_once_async(DemoGpuSampler(url, timeout_s=0.3))
            assert out.gpus == [] and out.error == reasons.DEMO_NOT_ANSWERING
    finally:
        slow.close()


def test_null_sampler_async():
    out = asyncio.run(NullSampler("GPU sampling disabled (--no-gpu)").sample_async())
    assert out.gpus == [] and out.error == "GPU sampling disabled (--no-gpu)"
