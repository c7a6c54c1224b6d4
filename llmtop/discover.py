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

3. **Other network namespaces** (containers, pods): an engine process whose ``/proc/<pid>/ns/net``
   differs from ours (or, without root, whose addresses differ) is read in its own namespace
   (``/proc/<pid>/net/tcp{,6}``, ``fib_trie``) and scraped where the host reaches it: the host
   port that publishes it (``docker-proxy``) first, else its namespace address. Its identity
   (``llmtop.sources.containers``) travels on the target. What cannot be read is said once, in
   ``notes`` (``docs/discovery.md``).

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
from llmtop.model import Container
from llmtop.router_ports import api_ports, titled_router
from llmtop.sources import containers, procnet, sockdiag
from llmtop.targets import ENGINE_DEFAULT_PORTS, format_hostport, make_target

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
    ("dynamo_component_", "dynamo_worker"),  # after the engines it passes through
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


def _flag_ports(engine: str, argv: Sequence[str]) -> tuple[int | None, tuple[int, ...]]:
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
    container: Container | None = None
    """Its container, pod or namespace (engines outside the host's network)."""
    api_port: int | None = None
    """A router's serving port when its metrics port differs (its worker list is there)."""


def _connect_host(ip: str | None, host: str) -> str:
    if ip is None or ip in _LOCAL_BINDS or ip.startswith("127."):
        return host
    if ip == "::1":
        return "::1"
    return ip


def _process_candidates(proc_root: str | os.PathLike[str], host: str,
                        notes: list[str] | None = None) -> list[_Candidate]:
    """Sync: engine processes -> candidate (host, port, engine); what could not be read is
    appended to ``notes``."""
    cmdlines = {pid: procnet.cmdline(pid, proc_root) for pid in procnet.pids(proc_root)}
    procs = engine_processes(proc_root, cmdlines)
    if not procs:
        return []
    procs, out = _namespace_candidates(procs, cmdlines, proc_root, host, notes)
    return out + _host_candidates(procs, proc_root, host)


def _host_candidates(procs: list[EngineProcess], proc_root: str | os.PathLike[str], host: str
                     ) -> list[_Candidate]:
    if not procs:
        return []
    table = (_diag(None, proc_root) if os.fspath(proc_root) == "/proc" else None)
    if table is None:
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
    for p in procs:  # a router's serving port beside its metrics port: GET /workers there
        ports = api_ports(p.engine, p.flag_port, p.extra_ports, procnet.ports_of_pid(
            p.pid, proc_root, table=table) - skip if p.engine == "sglang-router" else ())
        for c in (c for c in out if c.engine == p.engine and c.port in ports):
            c.api_port = ports[c.port]
    return out


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _namespace_candidates(
    procs: list[EngineProcess], cmdlines: dict[int, list[str]],
    proc_root: str | os.PathLike[str], host: str, notes: list[str] | None,
) -> tuple[list[EngineProcess], list[_Candidate]]:
    """Split off the engine processes in other network namespaces and make their candidates:
    each engine's port in its own namespace, at the host port that publishes it (preferred)
    or at its namespace address. Returns (processes on the host's network, candidates)."""
    own_ns = procnet.netns_of("self", proc_root)
    own_addrs = procnet.addresses_of("self", proc_root)
    host_procs: list[EngineProcess] = []
    out: list[_Candidate] = []
    published = containers.docker_proxies(cmdlines)
    names = containers.Names(proc_root=proc_root, conmon=containers.conmon_names(cmdlines),
                             netns=procnet.netns_names())
    away: list[tuple[EngineProcess, int | None, object, list[str]]] = []
    first: dict[object, int] = {}  # one process per namespace: whose tables are read
    for p in procs:
        ns = procnet.netns_of(p.pid, proc_root)
        addrs = procnet.addresses_of(p.pid, proc_root)
        if ns is not None and own_ns is not None:
            other = ns != own_ns
        else:  # no root: another user's ns link is closed; its addresses still tell
            other = (addrs is not None and own_addrs is not None
                     and sorted(addrs) != sorted(own_addrs))
        if not other:
            host_procs.append(p)
            continue
        key: object = ns if ns is not None else tuple(addrs or ())
        if ns is not None or not (p.flag_port or ENGINE_DEFAULT_PORTS.get(p.engine)):
            first.setdefault(key, p.pid)  # without root, a named port needs no table
        away.append((p, ns, key, addrs or []))
    tables = _read_tables(first, proc_root)
    unreadable, no_root, loopback = 0, 0, 0
    for p, ns, key, ns_addrs in away:
        if key not in first:  # no root, its port on its command line: probed there
            no_root += 1
            port = p.flag_port or ENGINE_DEFAULT_PORTS[p.engine]
            where = _reach("0.0.0.0", port, ns_addrs, published, host)
            if where is not None:
                out.append(_Candidate(where[0], where[1], p.engine, False,
                                      names.identify(p.pid, ns)))
            continue
        table = tables[key]
        if table is None:
            unreadable += 1
            continue
        inodes = procnet.socket_inodes(p.pid, proc_root)
        if _wants_v6(p, inodes, table):  # its socket is not an IPv4 one: read tcp6 too
            table.update(procnet.listen_table_of(first[key], proc_root, files=("tcp6",))
                         or {})
        if ns is None:  # its ns link is closed to us: so are its sockets (no root)
            no_root += 1
        by_port = {sk.port: sk.ip for sk in table.values()}
        mine = {table[i].port for i in inodes if i in table} - set(p.extra_ports)
        ports, certain = _ns_ports(p, mine, by_port)
        ident = names.identify(p.pid, ns)
        for port in ports:
            where = _reach(by_port[port], port, ns_addrs, published, host)
            if where is None:
                loopback += 1
                continue
            out.append(_Candidate(where[0], where[1], p.engine, certain, ident))
    if notes is not None:
        if unreadable:
            notes.append(f"{_plural(unreadable, 'engine process', 'engine processes')} in "
                         "other network namespaces could not be read: run as root, or give "
                         "their addresses")
        if no_root:
            notes.append(f"{_plural(no_root, 'engine process', 'engine processes')} in other "
                         "network namespaces were read without their sockets and namespace "
                         "names (found by their command lines' ports): run as root to see "
                         "which namespace each is")
        if loopback:
            notes.append(("1 engine in another network namespace listens on its own "
                          "loopback only" if loopback == 1 else f"{loopback} engines in other "
                          "network namespaces listen on their own loopback only")
                         + ", which this host cannot reach: publish the port or give the "
                         "address")
        if names.unreadable:
            notes.append("container names could not be read from "
                         f"{', '.join(sorted(names.unreadable))}: run as root to see them")
    return host_procs, out


def _read_tables(first: dict[object, int], proc_root: str | os.PathLike[str]
                 ) -> dict[object, dict[int, procnet.ListenSocket] | None]:
    """Each namespace's listening table: by netlink sock_diag as root (``sockdiag``), else
    its IPv4 ``/proc/<pid>/net/tcp``, read side by side (each read walks the kernel's whole
    socket hash: a dozen namespaces one after the other cost ~250 ms on a VM)."""
    if os.fspath(proc_root) == "/proc":
        fast = {k: _diag(pid, proc_root) for k, pid in first.items()}
        if all(t is not None for t in fast.values()):
            return fast
    if len(first) <= 1:
        return {k: procnet.listen_table_of(pid, proc_root, files=("tcp",))
                for k, pid in first.items()}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(first))) as pool:
        got = pool.map(lambda pid: procnet.listen_table_of(pid, proc_root, files=("tcp",)),
                       first.values())
        return dict(zip(first, got, strict=True))


def _diag(pid: int | None, proc_root: str | os.PathLike[str]
          ) -> dict[int, procnet.ListenSocket] | None:
    """The listening table of ``pid``'s namespace (ours: None) by sock_diag, or None."""
    try:
        return sockdiag.listen_table(None if pid is None else
                                     os.path.join(os.fspath(proc_root), str(pid), "ns", "net"))
    except Exception:  # any surprise: /proc is read instead
        return None


def _wants_v6(p: EngineProcess, inodes: set[int], table: dict[int, procnet.ListenSocket]
              ) -> bool:
    """True when the engine's socket is not in the IPv4 table: its own socket inodes (root),
    else the port its command line names (or its default), are missing."""
    if any(sk.v6 for sk in table.values()):
        return False  # read already
    if inodes:
        return not inodes & table.keys()
    want = p.flag_port or ENGINE_DEFAULT_PORTS.get(p.engine)
    return want is None or want not in {sk.port for sk in table.values()}


def _ns_ports(p: EngineProcess, mine: set[int], by_port: dict[int, str]
              ) -> tuple[list[int], bool]:
    """The engine's HTTP port(s) in its namespace and whether they are sure (its own
    socket) or to be probed (found by its command line, without root)."""
    listening = set(by_port) - set(p.extra_ports)
    default = ENGINE_DEFAULT_PORTS.get(p.engine)
    for port in (p.flag_port, default):
        if port is not None and port in (mine or listening):
            return [port], port in mine
    pool = mine or listening
    if len(pool) == 1:
        return sorted(pool), bool(mine)
    return sorted(pool), False


def _reach(bound: str, port: int, addrs: list[str], published: list[containers.Published],
           host: str) -> tuple[str, int] | None:
    """Where the host reaches a socket bound to ``bound:port`` in a namespace with
    ``addrs``: the publishing host port first, else the namespace address (None: the
    socket listens on the namespace's loopback only)."""
    wild = bound in ("0.0.0.0", "::", "::ffff:0.0.0.0")
    for pub in published:
        if pub.container_port == port and pub.container_ip in addrs and (
                wild or pub.container_ip == bound):
            return _connect_host(pub.host_ip, host), pub.host_port
    if bound.startswith("127.") or bound == "::1":
        return None
    if wild:
        v4 = [a for a in addrs if ":" not in a]
        pick = (v4 or addrs or [None])[0]
        return (pick, port) if pick is not None else None
    return bound, port


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
            return _Candidate(c.host, c.port, c.engine or engine, True, c.container, c.api_port)
    elif status == 501 and "--metrics" in text:
        # shows the hint as its error
        return _Candidate(c.host, c.port, "llamacpp", True, c.container)
    elif status == 404:
        with contextlib.suppress(OSError, ValueError, asyncio.IncompleteReadError):
            status, _, body = await _get_head(c.host, c.port, "/api/version", key)
            if status == 200:
                obj = json.loads(body.decode("utf-8", "replace"))
                if isinstance(obj, dict) and "version" in obj:
                    return _Candidate(c.host, c.port, "ollama", True, c.container)
    if c.certain or (c.engine is not None and status in (200, 401, 403)):
        return c
    return None


async def _from_processes(
    proc_root: str | os.PathLike[str], host: str, key: str | None, results: list[_Candidate],
    notes: list[str] | None = None,
) -> None:
    cands = await asyncio.to_thread(_process_candidates, proc_root, host, notes)
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
            best[k] = _Candidate(c.host, c.port, c.engine, c.certain,
                                 c.container or (best[k].container if k in best else None),
                                 c.api_port or (best[k].api_port if k in best else None))
        elif best[k].container is None and c.container is not None:
            best[k].container = c.container  # the port probe found a published container
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
            container=c.container,
            api_url=(f"http://{format_hostport(c.host, c.api_port)}"
                     if c.api_port is not None else None),
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
    notes: list[str] | None = None,
) -> list[Target]:
    """Engines on this machine, found within ``timeout_s`` in total (never raises). What
    could not be read (other users' namespaces without root) is appended to ``notes``, one
    sentence each, saying what to do."""
    results: list[_Candidate] = []
    key = config.api_key
    tasks = [
        asyncio.ensure_future(_from_port(_Candidate(host, p, None, False), key, results))
        for p in dict.fromkeys(ports)
    ]
    tasks.append(asyncio.ensure_future(_from_processes(proc_root, host, key, results, notes)))
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
