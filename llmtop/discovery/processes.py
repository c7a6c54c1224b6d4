"""Engine processes in the process table: which command lines are engines, on which port.

- ``recognise(argv)``: the engine a command line launches (known launchers), or None.
- ``engine_processes(proc_root)``: every visible engine process with the port its flags name.
- The HTTP port is the one named by the launcher's flag (``--port``, ``--server-port``,
  ``--metrics-port`` for tritonserver, ``-a :9400`` for dcgm-exporter); the routers' metrics
  port is ``--prometheus-port``; TGI's Prometheus port is a second port of the same server.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from llmtop.discovery.routers import titled_router
from llmtop.sources import procnet

__all__ = ["EngineProcess", "engine_processes", "flag_ports", "recognise"]


@dataclass(frozen=True, slots=True)
class EngineProcess:
    """An engine process seen in ``/proc``."""

    pid: int
    engine: str
    argv: tuple[str, ...]
    flag_port: int | None
    """The HTTP/metrics port named on the command line, if any."""
    extra_ports: tuple[int, ...] = ()
    """Other ports of the same server that must not become targets (TGI's Prometheus)."""


def _base(arg: str) -> str:
    return os.path.basename(arg)


def recognise(argv: Sequence[str]) -> str | None:
    """Engine id for a command line, or None. Child helpers (Ollama runners) are not engines."""
    if not argv:
        return None
    demo = _demo_engines(argv)
    if demo is not None:
        return demo[0] if len(demo) == 1 else None
    names = [_base(a) for a in argv[:4]]
    joined = " ".join(argv[:12])

    def sub(cmd: str, word: str) -> bool:
        return any(n == cmd and i + 1 < len(argv) and argv[i + 1] == word
                   for i, n in enumerate(names))

    if "vllm-router" in names or "vllm_router.launch_router" in joined:
        return "vllm-router"
    if "sglang_router.launch_router" in joined or "smg" in names or titled_router(argv):
        return "sglang-router"
    if "vllm.entrypoints" in joined or sub("vllm", "serve"):
        return "vllm"
    if "sglang.launch_server" in joined or sub("sglang", "serve"):
        return "sglang"
    if "tritonserver" in names:
        return "triton"
    if "trtllm-serve" in names:
        return "trtllm"
    if "text-generation-router" in names or "text-generation-launcher" in names:
        return "tgi"
    if "llama-server" in names:
        return "llamacpp"
    if sub("lmdeploy", "serve") or "lmdeploy.serve" in joined:
        return "lmdeploy"
    if sub("ollama", "serve"):
        return "ollama"
    if "dcgm-exporter" in names:
        return "dcgm"
    return None


def _demo_engines(argv: Sequence[str]) -> list[str] | None:
    """``llmtop demo serve --engines vllm ...``: the engines it serves (None: not the demo)."""
    for i, a in enumerate(argv[:3]):
        if _base(a) == "llmtop" and list(argv[i + 1:i + 3]) == ["demo", "serve"]:
            value = _flag(argv, "--engines") or "vllm,sglang,triton"
            return [e.strip() for e in value.split(",") if e.strip()]
    return None


def _flag(argv: Sequence[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a[len(n) + 1 :]
    return None


def _port(value: str | None) -> int | None:
    if value is None:
        return None
    v = value.rsplit(":", 1)[-1]  # dcgm-exporter "-a :9400" / "host:9400"
    try:
        p = int(v)
    except ValueError:
        return None
    return p if 0 < p < 65536 else None


def flag_ports(engine: str, argv: Sequence[str]) -> tuple[int | None, tuple[int, ...]]:
    """(the port to scrape named by the flags, other ports of the same server)."""
    if _demo_engines(argv) is not None:  # its one engine serves metrics on its one port
        return _port((_flag(argv, "--ports") or "").split(",")[0] or None), ()
    if engine == "triton":
        if (_flag(argv, "--allow-metrics") or "").lower() in ("false", "0"):
            return None, ()
        return _port(_flag(argv, "--metrics-port")) or 8002, ()
    if engine == "lmdeploy":
        return _port(_flag(argv, "--server-port")), ()
    if engine == "dcgm":
        return _port(_flag(argv, "-a", "--address")), ()
    if engine == "tgi":
        prom = _port(_flag(argv, "--prometheus-port")) or 9000
        return _port(_flag(argv, "--port", "-p")), (prom,)
    if engine in ("vllm-router", "sglang-router"):  # metrics on their own port
        http = _port(_flag(argv, "--port"))
        prom = _port(_flag(argv, "--prometheus-port")) or (None if titled_router(argv) else 29000)
        return prom, (http,) if http is not None else ()
    return _port(_flag(argv, "--port")), ()


def engine_processes(proc_root: str | os.PathLike[str] = "/proc",
                     cmdlines: dict[int, list[str]] | None = None) -> list[EngineProcess]:
    """Visible processes whose command line is a known engine launcher (``cmdlines``: the
    command lines already read, ``{pid: argv}``)."""
    me = os.getpid()
    out = []
    if cmdlines is None:
        cmdlines = {pid: procnet.cmdline(pid, proc_root) for pid in procnet.pids(proc_root)}
    for pid, argv in cmdlines.items():
        if pid == me:
            continue
        engine = recognise(argv)
        if engine is None:
            continue
        port, extra = flag_ports(engine, argv)
        if engine == "triton" and port is None:
            continue  # metrics disabled
        out.append(EngineProcess(pid, engine, tuple(argv), port, extra))
    return out
