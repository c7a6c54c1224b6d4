"""The search of this machine for inference engines, inside one time budget (0.5 s).

Two sources, run concurrently:

1. **Default ports** (``DEFAULT_PORTS``): a port becomes a target only when the answer looks
   like an engine (``discovery.probe``); a Grafana on 3000 or a web app on 8080 is not.
2. **Engine processes** on any port (``discovery.processes``): on the host's network
   (``discovery.host``) and in other network namespaces (``discovery.namespaces``).

- Targets carry engine hints where known and are deduplicated by (host, port).
- Nothing here raises for a missing ``/proc``, other users' processes or a slow port: the
  result is just shorter, and what could not be read is said in ``notes``.
- The port list, ``/proc`` root and host are injectable for tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterable, Sequence

from llmtop.config import Config, Target
from llmtop.discovery.candidates import Candidate
from llmtop.discovery.host import host_candidates
from llmtop.discovery.namespaces import namespace_candidates
from llmtop.discovery.probe import probe
from llmtop.discovery.processes import engine_processes
from llmtop.sources import procnet
from llmtop.targets import make_target
from llmtop.urls import netloc

__all__ = ["DEFAULT_PORTS", "discover", "process_candidates"]

DEFAULT_PORTS: tuple[int, ...] = (8000, 30000, 8002, 3000, 9000, 8080, 23333, 11434, 9400,
                                  29000)
"""vLLM/Triton HTTP/trtllm-serve, SGLang, Triton metrics, TGI, TGI Prometheus, llama.cpp,
LMDeploy, Ollama, DCGM exporter, and the vLLM / SGLang routers' Prometheus port (29000:
``--prometheus-port`` in vllm-project/router ``router_args.py``, ``PrometheusConfig`` in
both routers' ``metrics.rs``)."""


def process_candidates(proc_root: str | os.PathLike[str], host: str,
                       notes: list[str] | None = None) -> list[Candidate]:
    """Sync: engine processes -> candidate (host, port, engine); what could not be read is
    appended to ``notes``."""
    cmdlines = {pid: procnet.cmdline(pid, proc_root) for pid in procnet.pids(proc_root)}
    procs = engine_processes(proc_root, cmdlines)
    if not procs:
        return []
    procs, out = namespace_candidates(procs, cmdlines, proc_root, host, notes)
    return out + host_candidates(procs, proc_root, host)


async def _from_processes(
    proc_root: str | os.PathLike[str], host: str, key: str | None, results: list[Candidate],
    notes: list[str] | None = None,
) -> None:
    cands = await asyncio.to_thread(process_candidates, proc_root, host, notes)
    sure = [c for c in cands if c.certain]
    results.extend(sure)
    probed = await asyncio.gather(*(probe(c, key) for c in cands if not c.certain))
    results.extend(c for c in probed if c is not None)


async def _from_port(c: Candidate, key: str | None, results: list[Candidate]) -> None:
    found = await probe(c, key)
    if found is not None:
        results.append(found)


def _merge(found: Iterable[Candidate], config: Config) -> list[Target]:
    best: dict[tuple[str, int], Candidate] = {}
    for c in found:
        k = (c.host, c.port)
        if k not in best or (best[k].engine is None and c.engine is not None):
            best[k] = Candidate(c.host, c.port, c.engine, c.certain,
                                c.container or (best[k].container if k in best else None),
                                c.api_port or (best[k].api_port if k in best else None),
                                c.pid or (best[k].pid if k in best else None))
        elif best[k].container is None and c.container is not None:
            best[k].container = c.container  # the port probe found a published container
        if best[k].pid is None and c.pid is not None:
            best[k].pid = c.pid
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
            api_url=(f"http://{netloc(c.host, c.api_port)}"
                     if c.api_port is not None else None),
        )
        for c in best.values()
    ]
    pids = {(c.host, c.port): c.pid or (c.container.pid if c.container else None)
            for c in best.values()}
    out = [dataclasses.replace(t, pid=pids.get((t.host, t.port or 0))) for t in out]
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
    results: list[Candidate] = []
    key = config.api_key
    tasks = [
        asyncio.ensure_future(_from_port(Candidate(host, p, None, False), key, results))
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
