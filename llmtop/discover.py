"""Autodiscovery of inference engines on this machine (used when no target is given).

Two sources, run concurrently inside one total budget (0.5 s by default):

1. **Default ports** (``DEFAULT_PORTS``): a TCP connect plus a quick ``GET /metrics``
   (``GET /api/version`` when that is 404, for Ollama). A port becomes a target only when the
   answer looks like an engine: a known metric-name prefix in the first 64 KiB, trtllm-serve's
   JSON list, llama.cpp's 501 "start it with --metrics", or Ollama's version JSON. A Grafana
   on 3000 or a web app on 8080 is not picked up.
2. **Engine processes** on any port: ``/proc/<pid>/cmdline`` is matched against the known
   launchers (``recognise``); their LISTEN sockets come from ``llmtop.sources.procnet``. The
   HTTP port is the one named by the launcher's flag (``--port``, ``--server-port``,
   ``--metrics-port`` for tritonserver, ``-a :9400`` for dcgm-exporter), else the engine's
   default port, else the only listening port; when several are left they are probed.

Targets carry engine hints where known and are deduplicated by (host, port). Nothing here
raises for a missing ``/proc``, other users' processes or a slow port: the result is just
shorter. The port list, ``/proc`` root and host are injectable for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llmtop.config import Config, Target
from llmtop.sources import procnet
from llmtop.targets import ENGINE_DEFAULT_PORTS, make_target

__all__ = [
    "DEFAULT_PORTS",
    "EngineProcess",
    "discover",
    "engine_processes",
    "recognise",
    "sniff_engine",
]

DEFAULT_PORTS: tuple[int, ...] = (8000, 30000, 8002, 3000, 9000, 8080, 23333, 11434, 9400,
                                  29000)
"""vLLM/Triton HTTP/trtllm-serve, SGLang, Triton metrics, TGI, TGI Prometheus, llama.cpp,
LMDeploy, Ollama, DCGM exporter, and the vLLM / SGLang routers' Prometheus port (29000:
``--prometheus-port`` in vllm-project/router ``router_args.py``, ``PrometheusConfig`` in
both routers' ``metrics.rs``)."""

_HEAD_CAP = 64 * 1024
_SNIFF = (
    # Triton first: its vLLM backend also exposes vllm: names
    ("nv_inference_", "triton"),
    ("nv_gpu_", "triton"),
    ("nv_trt_llm_", "triton"),
    ("nv_llm_", "triton"),
    ("vllm_router_", "vllm-router"),
    ("smg_", "sglang-router"),
    ("sgl_router_", "sglang-router"),
    ("vllm:current_qps", "production-stack"),  # its re-exported vllm:* are not an engine's
    ("vllm:healthy_pods_total", "production-stack"),
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("sglang_", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llamacpp"),
    ("lmdeploy:", "lmdeploy"),
    ("DCGM_FI_", "dcgm"),
    ("trtllm_", "trtllm"),
)
_LOCAL_BINDS = ("0.0.0.0", "::", "127.0.0.1", "::ffff:0.0.0.0")


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
    names = [_base(a) for a in argv[:4]]
    joined = " ".join(argv[:12])

    def sub(cmd: str, word: str) -> bool:
        return any(n == cmd and i + 1 < len(argv) and argv[i + 1] == word
                   for i, n in enumerate(names))

    if "vllm-router" in names or "vllm_router.launch_router" in joined:
        return "vllm-router"
    if "sglang_router.launch_router" in joined or "smg" in names:
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


def _flag_ports(engine: str, argv: Sequence[str]) -> tuple[int | None, tuple[int, ...]]:
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
        return (_port(_flag(argv, "--prometheus-port")) or 29000,
                (http,) if http is not None else ())
    return _port(_flag(argv, "--port")), ()


def engine_processes(proc_root: str | os.PathLike[str] = "/proc") -> list[EngineProcess]:
    """Visible processes whose command line is a known engine launcher."""
    me = os.getpid()
    out = []
    for pid in procnet.pids(proc_root):
        if pid == me:
            continue
        argv = procnet.cmdline(pid, proc_root)
        engine = recognise(argv)
        if engine is None:
            continue
        port, extra = _flag_ports(engine, argv)
        if engine == "triton" and port is None:
            continue  # metrics disabled
        out.append(EngineProcess(pid, engine, tuple(argv), port, extra))
    return out


@dataclass(slots=True)
class _Candidate:
    host: str
    port: int
    engine: str | None
    certain: bool
    """Known to be the engine's listening HTTP port (no probe needed)."""


def _connect_host(ip: str | None, host: str) -> str:
    if ip is None or ip in _LOCAL_BINDS or ip.startswith("127."):
        return host
    if ip == "::1":
        return "::1"
    return ip


def _process_candidates(proc_root: str | os.PathLike[str], host: str) -> list[_Candidate]:
    """Sync: engine processes -> candidate (host, port, engine)."""
    procs = engine_processes(proc_root)
    if not procs:
        return []
    table = procnet.listen_table(proc_root)
    by_port = {s.port: s.ip for s in table.values()}
    out: list[_Candidate] = []
    skip: set[int] = set()
    for p in procs:
        skip.update(p.extra_ports)
    for p in procs:
        listening = procnet.ports_of_pid(p.pid, proc_root, table=table) - skip
        default = ENGINE_DEFAULT_PORTS.get(p.engine)
        if p.engine == "tgi" and not listening:
            continue  # the launcher; its router child holds the socket
        if p.flag_port is not None:
            if listening and p.flag_port not in listening:
                continue  # not serving yet (e.g. still loading the model)
            out.append(_Candidate(_connect_host(by_port.get(p.flag_port), host), p.flag_port,
                                  p.engine, certain=bool(listening)))
        elif default is not None and default in listening:
            out.append(_Candidate(_connect_host(by_port.get(default), host), default, p.engine,
                                  certain=True))
        elif len(listening) == 1:
            (only,) = listening
            out.append(_Candidate(_connect_host(by_port.get(only), host), only, p.engine, True))
        elif listening:
            for port in sorted(listening):
                out.append(_Candidate(_connect_host(by_port.get(port), host), port, p.engine,
                                      certain=False))
        elif default is not None:
            out.append(_Candidate(host, default, p.engine, certain=False))
    return out


def sniff_engine(head: str) -> str | None:
    """Engine id from the first bytes of a metrics body (known name prefixes), or None."""
    s = head.lstrip()
    if s.startswith("["):
        return "trtllm"  # trtllm-serve /metrics: a JSON list of iteration stats
    for prefix, engine in _SNIFF:
        if s.startswith(prefix) or ("\n" + prefix) in head:
            return engine
    return None


async def _get_head(host: str, port: int, path: str, key: str | None) -> tuple[int, str, bytes]:
    """(status, content type, first 64 KiB of body) of a tiny HTTP/1.0 GET."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        hp = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        writer.write(
            f"GET {path} HTTP/1.0\r\nHost: {hp}\r\nUser-Agent: llmtop-discover\r\n"
            f"Accept: text/plain, */*\r\n{auth}Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
        data = b""
        while len(data) < _HEAD_CAP:
            chunk = await reader.read(_HEAD_CAP - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    ctype = ""
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-type":
            ctype = v.strip().lower()
    return status, ctype, body


async def _probe(c: _Candidate, key: str | None) -> _Candidate | None:
    """Is an engine answering at ``c``? Returns the candidate (engine filled) or None."""
    try:
        status, ctype, body = await _get_head(c.host, c.port, "/metrics", key)
    except (OSError, ValueError, asyncio.IncompleteReadError):
        return c if c.certain else None
    text = body.decode("utf-8", "replace")
    html = "text/html" in ctype or text.lstrip()[:16].lower().startswith(("<!doctype", "<html"))
    if status == 200 and not html:
        engine = sniff_engine(text) or c.engine
        if engine is not None:
            return _Candidate(c.host, c.port, c.engine or engine, True)
    elif status == 501 and "--metrics" in text:
        return _Candidate(c.host, c.port, "llamacpp", True)  # shows the hint as its error
    elif status == 404:
        with contextlib.suppress(OSError, ValueError, asyncio.IncompleteReadError):
            status, _, body = await _get_head(c.host, c.port, "/api/version", key)
            if status == 200:
                obj = json.loads(body.decode("utf-8", "replace"))
                if isinstance(obj, dict) and "version" in obj:
                    return _Candidate(c.host, c.port, "ollama", True)
    if c.certain or (c.engine is not None and status in (200, 401, 403)):
        return c
    return None


async def _from_processes(
    proc_root: str | os.PathLike[str], host: str, key: str | None, results: list[_Candidate]
) -> None:
    cands = await asyncio.to_thread(_process_candidates, proc_root, host)
    sure = [c for c in cands if c.certain]
    results.extend(sure)
    probed = await asyncio.gather(*(_probe(c, key) for c in cands if not c.certain))
    results.extend(c for c in probed if c is not None)


async def _from_port(c: _Candidate, key: str | None, results: list[_Candidate]) -> None:
    found = await _probe(c, key)
    if found is not None:
        results.append(found)


def _merge(found: Iterable[_Candidate], config: Config) -> list[Target]:
    best: dict[tuple[str, int], _Candidate] = {}
    for c in found:
        k = (c.host, c.port)
        if k not in best or (best[k].engine is None and c.engine is not None):
            best[k] = c
    # TGI serves the same metrics on its main port and on its Prometheus port (9000)
    tgi_hosts = {h for (h, p), c in best.items() if c.engine == "tgi" and p != 9000}
    for h in tgi_hosts:
        if (h, 9000) in best and best[(h, 9000)].engine == "tgi":
            del best[(h, 9000)]
    out = [
        make_target(
            c.host,
            c.port,
            engine=c.engine,
            timeout_s=config.timeout_s,
            verify_tls=config.verify_tls,
        )
        for c in best.values()
    ]
    return sorted(out, key=lambda t: (t.host, t.port or 0))


async def discover(
    config: Config,
    *,
    ports: Sequence[int] = DEFAULT_PORTS,
    host: str = "127.0.0.1",
    timeout_s: float = 0.5,
    proc_root: str | os.PathLike[str] = "/proc",
) -> list[Target]:
    """Engines on this machine, found within ``timeout_s`` in total (never raises)."""
    results: list[_Candidate] = []
    key = config.api_key
    tasks = [
        asyncio.ensure_future(_from_port(_Candidate(host, p, None, False), key, results))
        for p in dict.fromkeys(ports)
    ]
    tasks.append(asyncio.ensure_future(_from_processes(proc_root, host, key, results)))
    try:
        # keep a little of the budget for cancelling what is still running
        _done, pending = await asyncio.wait(tasks, timeout=max(0.0, timeout_s - 0.02))
    except Exception:  # pragma: no cover - defensive
        pending = set(tasks)
    for t in pending:
        t.cancel()
    for t in tasks:
        # collect exceptions so none is logged as "never retrieved"
        if t.done() and not t.cancelled():
            t.exception()
    if pending:
        await asyncio.wait(pending, timeout=0.02)
    return _merge(list(results), config)
