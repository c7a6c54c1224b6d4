"""Routers in discovery: their serving port beside their metrics port, and their backends.

- ``api_ports``: where a router process serves its HTTP API beside its metrics port.
- ``backend_targets``: the worker URLs a router names become targets (at the next tick),
  unless a given or found target already has that host:port (``localhost`` and
  ``127.0.0.1`` are one host).

sglang-router 0.3.x serves ``/metrics`` on ``--prometheus-port`` and its API (``GET /workers``:
each worker's role) on ``--port``, and renames its process title to ``sglang::router`` (its
command line, flags included, is gone from ``/proc/<pid>/cmdline``): then its two listening
ports are the pair, and the probe tells which one serves metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from llmtop.config import Target
from llmtop.discovery.changes import new_targets
from llmtop.urls import netloc, split_url

__all__ = ["ROUTER_TITLE", "api_ports", "backend_targets", "titled_router"]

ROUTER_TITLE = "sglang::router"
"""The process title sglang-router sets (checked on 0.3.2)."""


def titled_router(argv: Sequence[str]) -> bool:
    """A command line that is only sglang-router's process title."""
    return bool(argv) and argv[0] == ROUTER_TITLE


def api_ports(engine: str, flag_port: int | None, extra_ports: Sequence[int],
              listening: Iterable[int]) -> dict[int, int]:
    """Metrics port -> serving port of an sglang-router process ({} for anything else, or
    when it cannot be told): from its flags, else from exactly two listening ports."""
    if engine != "sglang-router":
        return {}
    if flag_port is not None and extra_ports:
        return {flag_port: extra_ports[0]}
    ports = sorted(set(listening))
    return {ports[0]: ports[1], ports[1]: ports[0]} if len(ports) == 2 else {}


def backend_targets(urls: Iterable[str], have: Iterable[Target], *, timeout_s: float = 2.0,
                    verify_tls: bool = True) -> list[Target]:
    """Targets for routers' backend URLs that no target of ``have`` already covers (by name,
    base URL or host:port). Only a URL with an explicit port is an engine to scrape (a Dynamo
    worker id, an EPP pod name or a LiteLLM cloud ``api_base`` is not); its path is dropped
    (a LiteLLM ``api_base`` ends in ``/v1``: the engine's metrics are at ``/metrics``)."""
    from llmtop.errors import ConfigError
    from llmtop.targets import parse_target
    from llmtop.topology.link import host_port

    have = list(have)
    addrs = {host_port(t.base_url) for t in have}
    found: list[Target] = []
    for url in urls:
        base = _with_port(url)
        if base is None:
            continue
        try:
            t = parse_target(base, timeout_s=timeout_s, verify_tls=verify_tls)
        except ConfigError:
            continue
        addr = host_port(t.base_url)
        if addr is None or addr in addrs:
            continue
        addrs.add(addr)
        found.append(t)
    return new_targets(have, found)


def _with_port(url: str) -> str | None:
    """``scheme://host:port`` of a worker URL that names its port, else None."""
    got = split_url(url)
    if got is None:
        return None
    scheme, host, port = got
    if port is None or scheme not in ("http", "https"):
        return None
    return f"{scheme}://{netloc(host, port)}"
