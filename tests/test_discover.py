"""Autodiscovery: default-port probes within the budget, and engine processes in /proc."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
from aiohttp import web
from sources.helpers import fake_proc, free_port, http_server, proc_row, raw_server

from llmtop.config import Config
from llmtop.discovery.probe import sniff_engine
from llmtop.discovery.processes import engine_processes, recognise
from llmtop.discovery.search import DEFAULT_PORTS, discover

VLLM_TEXT = "# HELP vllm:num_requests_running x\nvllm:num_requests_running 0.0\n"


def test_default_ports_are_the_issue_list():
    assert DEFAULT_PORTS == (8000, 30000, 8002, 3000, 9000, 8080, 23333, 11434, 9400, 29000)


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["/venv/bin/python", "/venv/bin/vllm", "serve", "m", "--port", "8001"], "vllm"),
        (["vllm", "serve", "m"], "vllm"),
        (["python3", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["/opt/tritonserver/bin/tritonserver", "--model-repository=/m"], "triton"),
        (["/usr/bin/python", "/usr/local/bin/trtllm-serve", "m"], "trtllm"),
        (["text-generation-launcher", "--model-id", "m"], "tgi"),
        (["text-generation-router", "--port", "80"], "tgi"),
        (["./llama-server", "-m", "x.gguf", "--metrics"], "llamacpp"),
        (["/usr/bin/python", "/usr/bin/lmdeploy", "serve", "api_server", "m"], "lmdeploy"),
        (["/usr/local/bin/ollama", "serve"], "ollama"),
        (["/usr/local/bin/ollama", "runner", "--port", "40000"], None),
        (["dcgm-exporter", "-a", ":9401"], "dcgm"),
        (["python", "train.py", "--note", "vllm"], None),
        (["vim", "vllm_notes.txt"], None),
        ([], None),
    ],
)
def test_recognise(argv, engine):
    assert recognise(argv) == engine


def test_sniff_engine():
    assert sniff_engine("# HELP python_gc x\npython_gc 1\n" + VLLM_TEXT) == "vllm"
    assert sniff_engine('nv_inference_count{model="m"} 1\nvllm:x{model="m"} 1\n') == "triton"
    assert sniff_engine("sglang:num_running_reqs 1\n") == "sglang"
    assert sniff_engine('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 3\n') == "dcgm"
    assert sniff_engine('[{"iter": 1}]') == "trtllm"
    assert sniff_engine("grafana_build_info 1\n") is None


def test_engine_processes_ports_from_flags(tmp_path):
    root = fake_proc(
        tmp_path,
        {
            10: (["tritonserver", "--model-repository=/m", "--metrics-port=9002"], []),
            11: (["tritonserver", "--allow-metrics=false"], []),
            12: (["dcgm-exporter", "-a", ":9401"], []),
            13: (["lmdeploy", "serve", "api_server", "m", "--server-port", "24000"], []),
            14: (["text-generation-router", "--port", "8080", "--prometheus-port", "9100"], []),
            15: (["bash"], []),
        },
        [],
    )
    got = {p.pid: (p.engine, p.flag_port, p.extra_ports) for p in engine_processes(root)}
    assert got == {
        10: ("triton", 9002, ()),
        12: ("dcgm", 9401, ()),
        13: ("lmdeploy", 24000, ()),
        14: ("tgi", 8080, (9100,)),
    }


async def test_discover_fake_proc_picks_engine_ports(tmp_path):
    # pid 20: vllm with --port 18001 (listening on 18001 and an internal port)
    # pid 21: sglang without --port, one listening port -> that one
    # pid 22: vllm with --port 18003 that is not listening yet -> skipped
    # pid 23: ollama runner -> ignored
    # pid 24: triton bound to a specific address
    root = fake_proc(
        tmp_path,
        {
            20: (["vllm", "serve", "m", "--port", "18001"], [1, 2]),
            21: (["python", "-m", "sglang.launch_server"], [3]),
            22: (["vllm", "serve", "m", "--port", "18003"], [4]),
            23: (["ollama", "runner", "--port", "18004"], [5]),
            24: (["tritonserver", "--metrics-port", "18005"], [6]),
        },
        [
            proc_row("00000000:4651", "0A", 1),  # 18001
            proc_row("0100007F:7EF4", "0A", 2),  # 32500 internal
            proc_row("0100007F:4652", "0A", 3),  # 18002
            proc_row("0100007F:6000", "0A", 4),  # 24576, not 18003
            proc_row("0100007F:4654", "0A", 5),  # 18004
            proc_row("0500000A:4655", "0A", 6),  # 10.0.0.5:18005
        ],
    )
    targets = await discover(Config(), ports=(), proc_root=root, timeout_s=0.5)
    got = {(t.host, t.port, t.engine, t.name) for t in targets}
    assert got == {
        ("127.0.0.1", 18001, "vllm", "vllm@127.0.0.1:18001"),
        ("127.0.0.1", 18002, "sglang", "sglang@127.0.0.1:18002"),
        ("10.0.0.5", 18005, "triton", "triton@10.0.0.5:18005"),
    }


async def test_port_probe_within_budget_with_a_silent_port(tmp_path):
    async def metrics(_req):
        return web.Response(text=VLLM_TEXT)

    async def never(reader, _writer):
        await reader.read()

    async def grafana(_req):
        return web.Response(text="grafana_build_info 1\n")

    async with (
        http_server({"/metrics": metrics}) as good,
        raw_server(never) as silent,
        http_server({"/metrics": grafana}) as other,
    ):
        refused = free_port()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        targets = await discover(
            Config(), ports=(silent, good, refused, other), proc_root=tmp_path, timeout_s=0.5
        )
        took = loop.time() - t0
    print(f"discover with a silent port took {took:.3f}s")
    assert [(t.port, t.engine) for t in targets] == [(good, "vllm")]
    assert targets[0].name == f"vllm@127.0.0.1:{good}"


async def test_ollama_and_llamacpp_without_metrics(tmp_path):
    async def not_found(_req):
        return web.Response(status=404, text="404 page not found")

    async def version(_req):
        return web.json_response({"version": "0.5.1"})

    async def llama(_req):
        return web.json_response(
            {"error": {"code": 501, "message": "Start it with `--metrics`"}}, status=501
        )

    async with (
        http_server({"/metrics": not_found, "/api/version": version}) as ollama,
        http_server({"/metrics": llama}) as llamacpp,
    ):
        targets = await discover(Config(), ports=(ollama, llamacpp), proc_root=tmp_path)
    assert {(t.port, t.engine) for t in targets} == {(ollama, "ollama"), (llamacpp, "llamacpp")}


async def test_discover_degrades_without_proc(tmp_path):
    assert await discover(Config(), ports=(), proc_root=tmp_path / "missing") == []


SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"vllm:num_requests_running 0.0\\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


@pytest.fixture
def fake_vllm_process():
    if not Path("/proc/net/tcp").exists():
        pytest.skip("Linux /proc only")
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, "vllm.entrypoints.openai.api_server", "--model", "m"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(proc.stdout.readline())
        yield proc.pid, port
    finally:
        proc.kill()
        proc.wait()


async def test_discovers_real_engine_process_on_random_port(fake_vllm_process):
    _pid, port = fake_vllm_process
    t0 = time.monotonic()
    targets = await discover(Config(timeout_s=1.5), ports=())
    print(f"process discovery took {time.monotonic() - t0:.3f}s")
    mine = [t for t in targets if t.port == port]
    assert len(mine) == 1
    t = mine[0]
    assert t.engine == "vllm" and t.host == "127.0.0.1" and t.name == f"vllm@127.0.0.1:{port}"
    assert t.timeout_s == 1.5


async def test_port_and_process_results_are_deduped(fake_vllm_process):
    _pid, port = fake_vllm_process
    targets = await discover(Config(), ports=(port,))
    assert [t.name for t in targets if t.port == port] == [f"vllm@127.0.0.1:{port}"]
