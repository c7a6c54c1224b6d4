"""Attribution of GPU processes to targets, with real local processes on loopback ports."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmtop.config import Target
from llmtop.gpu import attribution
from llmtop.gpu.attribution import Attributor, attribute, engine_of, is_local_host, target_port
from llmtop.model import GpuProcess
from llmtop.sources import procnet

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")

# A server that listens on 127.0.0.1:0 and starts one child (the "engine core").
SERVER = textwrap.dedent(
    """
    import socket, subprocess, sys, time
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[-1]], close_fds=True
    )
    print(s.getsockname()[1], child.pid, flush=True)
    try:
        time.sleep(300)
    finally:
        child.kill()
    """
)

# A launcher (no socket) with two children: a router that listens, and a shard (TGI's layout).
LAUNCHER = textwrap.dedent(
    """
    import subprocess, sys, time
    router = subprocess.Popen(
        [sys.executable, "-c", '''
    import socket, time
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
    print(s.getsockname()[1], flush=True)
    time.sleep(300)
    ''', "text-generation-router"], stdout=subprocess.PIPE, text=True)
    port = router.stdout.readline().strip()
    shard = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                              "text-generation-server"])
    print(port, router.pid, shard.pid, flush=True)
    try:
        time.sleep(300)
    finally:
        router.kill(); shard.kill()
    """
)


class Procs:
    """Processes started by a test; each whole session is killed at teardown."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def start(self, argv: list[str]) -> tuple[subprocess.Popen, list[int]]:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.started.append(p)
        line = p.stdout.readline()  # type: ignore[union-attr]
        assert line, "helper process did not start"
        return p, [int(x) for x in line.split()]

    def stop(self) -> None:
        for p in self.started:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=10)
            if p.stdout:
                p.stdout.close()


@pytest.fixture
def procs():
    ps = Procs()
    yield ps
    ps.stop()


def vllm_server(procs: Procs) -> tuple[int, int, int]:
    p, (port, child) = procs.start(
        [sys.executable, "-c", SERVER, "vllm.entrypoints.openai.api_server", "VLLM::EngineCore"]
    )
    return p.pid, port, child


def unrelated(procs: Procs) -> int:
    _p, (pid,) = procs.start(
        [sys.executable, "-c", "import os,time; print(os.getpid(), flush=True); time.sleep(300)"]
    )
    return pid


def tgt(name: str, port: int, host: str = "127.0.0.1", engine: str | None = "vllm") -> Target:
    return Target(name=name, base_url=f"http://{host}:{port}", engine=engine, host=host, port=port)


def gp(*pids: int) -> list[GpuProcess]:
    return [GpuProcess(pid=p, used_bytes=1) for p in pids]


def test_engine_core_child_and_server_map_to_their_target(procs):
    server, port, core = vllm_server(procs)
    other = unrelated(procs)
    ps = gp(core, server, other)
    attribute(ps, [tgt("vllm@127.0.0.1", port)])
    assert [p.engine_target for p in ps] == ["vllm@127.0.0.1", "vllm@127.0.0.1", None]


def test_two_servers_each_get_their_own(procs):
    _s1, port1, c1 = vllm_server(procs)
    s2, port2, c2 = vllm_server(procs)
    ps = gp(c1, c2, s2)
    attribute(ps, [tgt("a", port1), tgt("b", port2, host="localhost")])
    assert [p.engine_target for p in ps] == ["a", "b", "b"]


def test_unmonitored_server_stays_none(procs):
    _, port1, c1 = vllm_server(procs)
    _, _, c2 = vllm_server(procs)  # a second vLLM nobody monitors
    ps = gp(c1, c2)
    attribute(ps, [tgt("a", port1)])
    assert [p.engine_target for p in ps] == ["a", None]


def test_same_port_under_two_names_is_ambiguous(procs):
    _, port, core = vllm_server(procs)
    ps = gp(core)
    attribute(ps, [tgt("a", port), tgt("b", port, host="localhost")])
    assert ps[0].engine_target is None


def test_remote_target_is_never_attributed(procs):
    _, port, core = vllm_server(procs)
    ps = gp(core)
    attribute(ps, [tgt("remote", port, host="10.1.2.3")])
    assert ps[0].engine_target is None


def test_sibling_under_an_engine_launcher(procs, tmp_path):
    script = tmp_path / "text-generation-launcher"
    script.write_text(LAUNCHER)
    _launcher, (port, router, shard) = procs.start([sys.executable, str(script)])
    other = unrelated(procs)
    ps = gp(shard, router, other)
    attribute(ps, [tgt("tgi@local", port, engine="tgi")])
    assert [p.engine_target for p in ps] == ["tgi@local", "tgi@local", None]


def test_invisible_and_pidless_processes_are_left_alone(procs):
    _, port, core = vllm_server(procs)
    ps = [
        GpuProcess(pid=core, visible=False, name="pid not visible from this namespace"),
        GpuProcess(pid=None),
    ]
    attribute(ps, [tgt("a", port)])
    assert [p.engine_target for p in ps] == [None, None]


def test_listener_cache_skips_the_fd_scan_on_later_ticks(procs, monkeypatch):
    _, port, core = vllm_server(procs)
    a = Attributor()
    calls = {"n": 0}
    real = procnet.pids

    def counting(*args, **kw):
        calls["n"] += 1
        return real(*args, **kw)

    monkeypatch.setattr(attribution.procnet, "pids", counting)
    targets = [tgt("a", port)]
    for _ in range(3):
        ps = gp(core)
        a.attribute(ps, targets)
        assert ps[0].engine_target == "a"
    assert calls["n"] == 1 and a.scans == 1
    t0 = time.perf_counter()
    for _ in range(20):
        a.attribute(gp(core), targets)
    print(f"cached attribution: {(time.perf_counter() - t0) / 20 * 1e3:.3f} ms per tick")


def test_listener_restart_is_noticed(procs):
    a = Attributor()
    srv, port, core = vllm_server(procs)
    ps = gp(core)
    a.attribute(ps, [tgt("a", port)])
    assert ps[0].engine_target == "a"
    os.killpg(srv, signal.SIGKILL)
    _srv2, port2, core2 = vllm_server(procs)
    ps = gp(core2, core)
    a.attribute(ps, [tgt("a", port2)])
    assert ps[0].engine_target == "a" and ps[1].engine_target is None


def test_down_port_is_rescanned_at_most_every_rescan_s(procs):
    now = [100.0]
    a = Attributor(clock=lambda: now[0], rescan_s=5.0)
    _, port, core = vllm_server(procs)
    targets = [tgt("a", port), tgt("down", 1)]  # nothing listens on port 1
    for dt in (0, 1, 2, 4.9):
        now[0] = 100 + dt
        ps = gp(core)
        a.attribute(ps, targets)
        assert ps[0].engine_target == "a"
    assert a.scans == 1
    now[0] = 105
    a.attribute(gp(core), targets)
    assert a.scans == 2


# --- title rule (socket owner unreadable), on a synthetic /proc ------------------------------


def _fake_proc(root: Path, procs: dict[int, tuple[int, str]], port: int) -> None:
    (root / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    line = (
        f"   0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        "  1000        0 424242 1\n"
    )
    (root / "net" / "tcp").write_text(header + line)
    (root / "net" / "tcp6").write_text(header)
    for pid, (ppid, cmd) in procs.items():
        d = root / str(pid)
        d.mkdir()
        (d / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
        (d / "comm").write_text(cmd.split()[0][:15] + "\n")
        (d / "stat").write_text(f"{pid} (x y) S {ppid} 0 0\n")
        # no fd/ folder: like another user's process without privileges


def test_title_rule_when_socket_owner_is_unreadable(tmp_path):
    _fake_proc(
        tmp_path,
        {100: (1, "python -m vllm.entrypoints.openai.api_server"), 101: (100, "VLLM::EngineCore")},
        8080,
    )
    a = Attributor(proc=str(tmp_path), hostname="box")
    ps = gp(101)
    a.attribute(ps, [tgt("v", 8080)])
    assert ps[0].engine_target == "v"
    ps = gp(101)
    a.attribute(ps, [tgt("v", 8080, engine=None)])  # engine unknown: no title match
    assert ps[0].engine_target is None
    ps = gp(101)
    a.attribute(ps, [tgt("v", 8081)])  # nothing listens on the target port
    assert ps[0].engine_target is None


def test_title_rule_with_two_instances_is_ambiguous(tmp_path):
    _fake_proc(
        tmp_path,
        {
            100: (1, "vllm serve m1"),
            101: (100, "VLLM::EngineCore"),
            200: (1, "vllm serve m2"),
            201: (200, "VLLM::EngineCore"),
        },
        8080,
    )
    ps = gp(101, 201)
    Attributor(proc=str(tmp_path), hostname="box").attribute(ps, [tgt("v", 8080)])
    assert [p.engine_target for p in ps] == [None, None]


# --- pure helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (["VLLM::EngineCore"], "vllm"),
        (["VLLM::Worker_TP0"], "vllm"),
        (["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"], "vllm"),
        (["/venv/bin/vllm", "serve", "Qwen/Qwen3-8B"], "vllm"),
        (["sglang::scheduler_TP0"], "sglang"),
        (["sglang::detokenizer"], "sglang"),
        (["python", "-m", "sglang.launch_server", "--model", "x"], "sglang"),
        (["/opt/tritonserver/bin/tritonserver", "--model-repository=/m"], "triton"),
        (["/usr/local/bin/trtllm-serve", "model"], "trtllm"),
        (["text-generation-launcher", "--model-id", "x"], "tgi"),
        (["/app/llama-server", "-m", "x.gguf"], "llamacpp"),
        (["/usr/local/bin/ollama", "serve"], "ollama"),
        (["/usr/bin/python", "/usr/bin/lmdeploy", "serve", "api_server", "x"], "lmdeploy"),
        (["python", "train.py"], None),
        ([], None),
        (None, None),
    ],
)
def test_engine_of(argv, engine):
    assert engine_of(argv) == engine


def test_engine_of_comm_only():
    assert engine_of(None, "tritonserver") == "triton"


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.0.1.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", True),
        ("box", True),
        ("BOX.example.com", True),
        ("192.0.2.1", False),  # TEST-NET-1: never ours
        ("gpu-node-7", False),
    ],
)
def test_is_local_host(host, local):
    assert is_local_host(host, "box.example.com") is local


def test_own_non_loopback_address_is_local():
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # UDP connect: picks a source address, sends nothing
        except OSError:
            pytest.skip("no route")
        mine = s.getsockname()[0]
    assert is_local_host(mine, "box")


def test_target_port_defaults():
    assert target_port(Target(name="a", base_url="http://h:8000")) == 8000
    assert target_port(Target(name="a", base_url="https://h")) == 443
    assert target_port(Target(name="a", base_url="http://h", port=9)) == 9


def test_attribute_never_raises():
    attribute([GpuProcess(pid=1)], [Target(name="x", base_url="http://[bad", port=1)])
    attribute([], [])
