"""Match routers' backends to engine rows by host:port, and give rows their router and role.

A backend URL names its engine (``http://10.0.0.5:8000``); an engine row's target has a base
URL. Loopback spellings (``localhost``, ``127.0.0.1``, ``[::1]``, ``0.0.0.0``) are one host.
Role order: the router's (P/D series), else the engine's own KV-transfer role
(``info["kv_role"]``: SGLang's ``engine_type``), else pod labels (``roles.role_from_labels``,
fleet mode), else a vLLM engine whose prompt tokens come from the KV transfer is ``decode``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from llmtop.model import EngineRow
from llmtop.model_stack import BackendRow, RouterRow
from llmtop.topology.roles import role_from_labels

__all__ = ["DECODE_BY_SOURCE", "host_port", "link_stack"]

DECODE_BY_SOURCE = 0.5
"""A vLLM engine whose prompt tokens over the window came more than half from
``external_kv_transfer`` (``vllm:prompt_tokens_by_source``) is a decode instance."""

_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::", "ip6-localhost"}


def host_port(url: str | None) -> tuple[str, int] | None:
    """``(host, port)`` of a URL (default ports by scheme); loopback names as 127.0.0.1."""
    if not url:
        return None
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if not host:
        return None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return ("127.0.0.1" if host in _LOOPBACK else host), port


def _engine_role(row: EngineRow) -> str | None:
    role = (row.info or {}).get("kv_role")
    if role in ("prefill", "decode", "both"):
        return role
    if row.labels and (role := role_from_labels(row.labels)) is not None:
        return role
    # vLLM names no role, but a decode instance takes its prompts' KV from the transfer
    src = (row.kv_transfer or {}).get("prompt_tokens_by_source") or {}
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
               urls: Mapping[str, str]) -> None:
    """Fill ``router``/``role`` of engine rows and ``target``/``capacity_share`` of backends
    (in place). ``urls``: target name -> base URL."""
    by_addr: dict[tuple[str, int], list[EngineRow]] = {}
    for row in engines:
        addr = host_port(urls.get(row.target))
        if addr is not None:
            by_addr.setdefault(addr, []).append(row)
        if row.role is None:
            row.role = _engine_role(row)
    for router in routers:
        for b in router.backends:
            addr = host_port(b.url)
            rows = by_addr.get(addr, []) if addr is not None else []
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
        for basis in ("seats", "kv"):
            caps = [_capacity(rows.get(b.target or ""), basis) for b in group]
            whole = sum(c for c in caps if c is not None)
            if any(c is None for c in caps) or whole <= 0:
                continue
            for b, c in zip(group, caps, strict=True):
                b.capacity_share, b.capacity_basis = (c or 0.0) / whole, basis
            break
