"""Match routers' backends to engine rows by host:port, and give rows their router and role.

A backend URL names its engine (``http://10.0.0.5:8000``); an engine row's target has a base
URL (direct mode), or several addresses (fleet mode: the ``instance`` values a row groups,
and ``pod:port``). Loopback spellings (``localhost``, ``127.0.0.1``, ``[::1]``, ``0.0.0.0``)
are one host. ``loose`` (fleet mode, where the router and Prometheus may name one pod two
ways) also reads a Kubernetes pod-IP name (``10-0-0-5.ns.pod.cluster.local``) as its IP, and
else matches a name's first DNS label and port (``vllm-0.vllm.ns.svc`` = pod ``vllm-0``)
when one target alone has it. A row several backends link to (an aggregate: rows grouped by
``job``...) gets no capacity share (its capacity is theirs together); each backend keeps
the router's numbers (``merge_backends`` sums them for the row's cells).
Role order: the router's (P/D series), else the engine's own KV-transfer role
(``info["kv_role"]``: SGLang's ``engine_type``), else pod labels (``roles.role_from_labels``,
fleet mode), else a vLLM engine whose prompt tokens come from the KV transfer is ``decode``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from llmtop.model import EngineRow
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.roles import role_from_labels
from llmtop.urls import THIS_MACHINE_NAMES
from llmtop.urls import host_port as url_host_port

__all__ = ["DECODE_BY_SOURCE", "host_port", "link_stack", "merge_backends"]

DECODE_BY_SOURCE = 0.5
"""A vLLM engine whose prompt tokens over the window came more than half from
``external_kv_transfer`` (``vllm:prompt_tokens_by_source``) is a decode instance."""

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"}) | THIS_MACHINE_NAMES
"""Hosts a URL names this machine by, keyed as ``127.0.0.1``; another loopback address
(``127.0.0.2``) stays itself: a socket bound there is a different one."""
_DASHED_IP = re.compile(r"(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


def host_port(url: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of a URL (default ports by scheme); loopback names as 127.0.0.1."""
    if not url:
        return None
    return _host_port(url)


@functools.lru_cache(maxsize=4096)
def _host_port(url: str) -> tuple[str, int] | None:
    """``host_port`` of a non-empty URL, remembered (the same few URLs every refresh)."""
    got = url_host_port(url)
    if got is None:
        return None
    host, port = got
    return ("127.0.0.1" if host in _LOOPBACK else host), port


def _canon(addr: tuple[str, int]) -> tuple[str, int]:
    """A pod-IP DNS name (``10-0-0-5.ns.pod.cluster.local``) as its IP; no trailing dot."""
    host = addr[0].rstrip(".")
    first, _, rest = host.partition(".")
    m = _DASHED_IP.fullmatch(first)
    if m and rest and all(int(x) < 256 for x in m.groups()):
        host = ".".join(m.groups())
    return host, addr[1]


def _short(addr: tuple[str, int]) -> tuple[str, int] | None:
    """A host name's first DNS label and the port (None for an IP address)."""
    host = addr[0]
    if ":" in host or _IPV4.fullmatch(host):
        return None
    return host.split(".", 1)[0], addr[1]


def _addrs(url: str | Collection[str] | None) -> list[tuple[str, int]]:
    urls = [url] if isinstance(url, str) or url is None else list(url)
    return [a for u in urls if (a := host_port(u)) is not None]


def _engine_role(row: EngineRow) -> str | None:
    role = (row.info or {}).get("kv_role")
    if role in ("prefill", "decode", "both"):
        return role
    if row.labels and (role := role_from_labels(row.labels)) is not None:
        return role
    # vLLM names no role, but a decode instance takes its prompts' KV from the transfer
    src = (row.kv_transfer.prompt_tokens_by_source if row.kv_transfer is not None
           else None) or {}
    known = {k: v for k, v in src.items() if v is not None}
    total = sum(known.values())
    if total > 0 and known.get("external_kv_transfer", 0.0) / total > DECODE_BY_SOURCE:
        return "decode"
    return None


def _capacity(row: EngineRow | None, basis: str) -> float | None:
    if row is None:
        return None
    return row.max_running if basis == "seats" else row.kv_capacity_tokens


def link_stack(engines: Sequence[EngineRow], routers: Sequence[RouterRow],
               urls: Mapping[str, str | Collection[str]], *, loose: bool = False) -> None:
    """Fill ``router``/``role`` of engine rows and ``target``/``capacity_share`` of backends
    (in place). ``urls``: target name -> base URL, or its addresses (``host:port``...);
    ``loose``: also pod-IP names and a name's first label (see the module doc)."""
    by_addr: dict[tuple[str, int], list[EngineRow]] = {}
    by_short: dict[tuple[str, int], list[EngineRow]] = {}
    for row in engines:
        for addr in dict.fromkeys(_canon(a) if loose else a for a in _addrs(urls.get(row.target))):
            by_addr.setdefault(addr, []).append(row)
            if loose and (short := _short(addr)) is not None:
                by_short.setdefault(short, []).append(row)
        if row.role is None:
            row.role = _engine_role(row)
    for router in routers:
        for b in router.backends:
            addr = host_port(b.url)
            if addr is not None and loose:
                addr = _canon(addr)
            rows = by_addr.get(addr, []) if addr is not None else []
            if not rows and loose and addr is not None and (short := _short(addr)):
                found = by_short.get(short, [])
                rows = found if len({r.target for r in found}) == 1 else []
            if not rows:
                continue
            b.target = rows[0].target
            for row in rows:
                if row.router is None:
                    row.router = router.target
                if b.role is not None:
                    row.role = b.role
                elif row.role is not None:
                    b.role = row.role
        _capacity_shares(router.backends, engines)


def _capacity_shares(backends: list[BackendRow], engines: Sequence[EngineRow]) -> None:
    """Each backend's share of its role pool's capacity: running limits (``seats``) when
    every backend of the pool has one, else KV tokens (``kv``) when every one has those."""
    rows = {r.target: r for r in engines if r.rank is None}
    for role in {b.role for b in backends}:
        group = [b for b in backends if b.role == role]
        shared = {t for b in group if (t := b.target) is not None
                  and sum(x.target == t for x in group) > 1}
        for basis in ("seats", "kv"):
            caps = {b.target or "": _capacity(rows.get(b.target or ""), basis) for b in group}
            whole = sum(c for c in caps.values() if c is not None)  # an aggregate row once
            if any(c is None for c in caps.values()) or whole <= 0:
                continue
            for b in group:  # backends of one aggregate row: their own capacity is unknown
                if b.target not in shared:
                    b.capacity_share = (caps[b.target or ""] or 0.0) / whole
                    b.capacity_basis = basis
            break


def merge_backends(backends: Sequence[BackendRow]) -> BackendRow:
    """One row's cells for the backends linked to it (a row grouped by ``job``... holds
    several): shares and requests/s summed, healthy only when all are, a breaker open when
    any is, the role when they agree; one backend is returned as is."""
    if len(backends) == 1:
        return backends[0]

    def total(vals: list[float | None]) -> float | None:
        known = [v for v in vals if v is not None]
        return sum(known) if known else None

    healthy = [b.healthy for b in backends]
    roles = {b.role for b in backends}
    return replace(
        backends[0], url=", ".join(b.url for b in backends),
        role=roles.pop() if len(roles) == 1 else None,
        healthy=None if None in healthy else all(healthy),
        breaker_open=True if any(b.breaker_open for b in backends)
        else None if any(b.breaker_open is None for b in backends) else False,
        routed_share=total([b.routed_share for b in backends]),
        requests_per_s=total([b.requests_per_s for b in backends]),
        pending=total([b.pending for b in backends]),
        capacity_share=total([b.capacity_share for b in backends]),
        capacity_basis=backends[0].capacity_basis)
