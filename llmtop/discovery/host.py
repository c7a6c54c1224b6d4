"""Engine processes on the host's own network: which of their listening ports to scrape.

- The port the launcher's flag names (kept only once it listens), else the engine's default
  port, else its only listening port; when several are left, each is probed.
- A router's serving port beside its metrics port is kept on the candidate (``/workers``).
"""

from __future__ import annotations

import os

from llmtop.discovery.candidates import Candidate, connect_host
from llmtop.discovery.processes import EngineProcess
from llmtop.discovery.routers import api_ports
from llmtop.discovery.sockets import own_table
from llmtop.sources import procnet
from llmtop.targets import ENGINE_DEFAULT_PORTS

__all__ = ["host_candidates"]


def host_candidates(procs: list[EngineProcess], proc_root: str | os.PathLike[str], host: str
                    ) -> list[Candidate]:
    """Candidates for engine processes on the host's network (``host``: how we dial it)."""
    if not procs:
        return []
    table = own_table(proc_root)
    by_port = {s.port: s.ip for s in table.values()}
    out: list[Candidate] = []
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
            out.append(Candidate(connect_host(by_port.get(p.flag_port), host), p.flag_port,
                                 p.engine, certain=bool(listening), pid=p.pid))
        elif default is not None and default in listening:
            out.append(Candidate(connect_host(by_port.get(default), host), default, p.engine,
                                 certain=True, pid=p.pid))
        elif len(listening) == 1:
            (only,) = listening
            out.append(Candidate(connect_host(by_port.get(only), host), only, p.engine, True,
                                 pid=p.pid))
        elif listening:
            for port in sorted(listening):
                out.append(Candidate(connect_host(by_port.get(port), host), port, p.engine,
                                     certain=False, pid=p.pid))
        elif default is not None:
            out.append(Candidate(host, default, p.engine, certain=False, pid=p.pid))
    for p in procs:  # a router's serving port beside its metrics port: GET /workers there
        ports = api_ports(p.engine, p.flag_port, p.extra_ports, procnet.ports_of_pid(
            p.pid, proc_root, table=table) - skip if p.engine == "sglang-router" else ())
        for c in (c for c in out if c.engine == p.engine and c.port in ports):
            c.api_port = ports[c.port]
    return out
