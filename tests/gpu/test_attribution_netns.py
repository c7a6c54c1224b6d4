"""GPU memory of engines in containers and pods: NVML reports host pids, and each process
is attributed to the engine in the namespace that owns it (fake NVML, fake /proc)."""

from __future__ import annotations

from pathlib import Path

from llmtop.config import Target
from llmtop.gpu.nvml import NvmlSampler
from llmtop.model import Container

from .fake_pynvml import FakeDevice, FakeNvml, FakeProc

GiB = 1024**3


def _proc(root: Path, procs: dict[int, tuple[int, str]]) -> Path:
    (root / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
    (root / "net" / "tcp").write_text(header)  # the host's table: the pods' sockets are not in it
    (root / "net" / "tcp6").write_text(header)
    for pid, (ppid, cmd) in procs.items():
        d = root / str(pid)
        d.mkdir()
        (d / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
        (d / "comm").write_text(cmd.split()[0][:15] + "\n")
        (d / "stat").write_text(f"{pid} (x y) S {ppid} 0 0\n")
    return root


def _pod(name: str, ip: str, pod: str, pid: int) -> Target:
    return Target(name, f"http://{ip}:8000", engine="vllm", host=ip, port=8000,
                  container=Container("containerd", None, "vllm", pod, "prod", None, pid=pid))


def test_two_pods_on_8000_each_get_their_gpu_memory(tmp_path):
    root = _proc(tmp_path, {
        200: (1, "vllm serve m --port 8000"), 201: (200, "VLLM::EngineCore"),
        300: (1, "vllm serve m --port 8000"), 301: (300, "VLLM::EngineCore"),
        400: (1, "python3 train.py"),
    })
    dev = FakeDevice(compute=[FakeProc(201, 30 * GiB), FakeProc(301, 20 * GiB),
                              FakeProc(400, 5 * GiB), FakeProc(999, 1 * GiB)])
    a = _pod("vllm@10.243.1.2:8000", "10.243.1.2", "vllm-0", 200)
    b = _pod("vllm@10.243.2.2:8000", "10.243.2.2", "vllm-1", 300)
    s = NvmlSampler([a, b], nvml=FakeNvml([dev]), hostname="box", proc=str(root),
                    host_pid_namespace=True)
    got = {p.pid: p.engine_target for p in s.sample().gpus[0].processes}
    assert got == {201: a.name, 301: b.name, 400: None, 999: None}


def test_a_gone_engine_pid_claims_nothing(tmp_path):
    root = _proc(tmp_path, {301: (300, "VLLM::EngineCore")})  # pid 300 has exited
    dev = FakeDevice(compute=[FakeProc(301, 20 * GiB)])
    s = NvmlSampler([], nvml=FakeNvml([dev]), hostname="box", proc=str(root),
                    host_pid_namespace=True)
    s.set_targets([_pod("vllm@10.243.2.2:8000", "10.243.2.2", "vllm-1", 300)])
    assert [p.engine_target for p in s.sample().gpus[0].processes] == [None]
