"""Engine processes in other network namespaces (containers, pods): where the host reaches them.

- An engine process whose ``/proc/<pid>/ns/net`` differs from ours (or, without root, whose
  addresses differ) is read in its own namespace: one process per namespace, its listening
  table by netlink as root (``discovery.sockets``), else ``/proc/<pid>/net/tcp{,6}``.
- It is scraped where the host reaches it: the host port that publishes it (``docker-proxy``)
  first, else its namespace address; a socket on the namespace's loopback only is not
  reachable.
- Its identity (``discovery.containers``) travels on the candidate.
- What cannot be read is said once in ``notes`` (``discovery.notes``).
"""

from __future__ import annotations

import os

from llmtop.discovery import containers
from llmtop.discovery import notes as said
from llmtop.discovery.candidates import Candidate, connect_host
from llmtop.discovery.processes import EngineProcess
from llmtop.discovery.sockets import read_tables
from llmtop.sources import procnet
from llmtop.targets import ENGINE_DEFAULT_PORTS

__all__ = ["namespace_candidates"]


def namespace_candidates(
    procs: list[EngineProcess], cmdlines: dict[int, list[str]],
    proc_root: str | os.PathLike[str], host: str, notes: list[str] | None,
) -> tuple[list[EngineProcess], list[Candidate]]:
    """Split off the engine processes in other network namespaces and make their candidates:
    each engine's port in its own namespace, at the host port that publishes it (preferred)
    or at its namespace address. Returns (processes on the host's network, candidates)."""
    own_ns = procnet.netns_of("self", proc_root)
    own_addrs = procnet.addresses_of("self", proc_root)
    host_procs: list[EngineProcess] = []
    out: list[Candidate] = []
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
    tables = read_tables(first, proc_root, notes)
    unreadable, no_root, loopback = 0, 0, 0
    for p, ns, key, ns_addrs in away:
        if key not in first:  # no root, its port on its command line: probed there
            no_root += 1
            port = p.flag_port or ENGINE_DEFAULT_PORTS[p.engine]
            where = _reach("0.0.0.0", port, ns_addrs, published, host)
            if where is not None:
                out.append(Candidate(where[0], where[1], p.engine, False,
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
            out.append(Candidate(where[0], where[1], p.engine, certain, ident))
    if notes is not None:
        if unreadable:
            notes.append(said.unreadable(unreadable))
        if no_root:
            notes.append(said.no_root(no_root))
        if loopback:
            notes.append(said.loopback(loopback))
        if names.unreadable:
            notes.append(said.no_names(names.unreadable))
    return host_procs, out


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
            return connect_host(pub.host_ip, host), pub.host_port
    if bound.startswith("127.") or bound == "::1":
        return None
    if wild:
        v4 = [a for a in addrs if ":" not in a]
        pick = (v4 or addrs or [None])[0]
        return (pick, port) if pick is not None else None
    return bound, port
