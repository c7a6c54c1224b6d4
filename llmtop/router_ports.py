"""Where a router process serves its HTTP API beside its metrics port (for discovery).

sglang-router 0.3.x serves ``/metrics`` on ``--prometheus-port`` and its API (``GET /workers``:
each worker's role) on ``--port``, and renames its process title to ``sglang::router`` (its
command line, flags included, is gone from ``/proc/<pid>/cmdline``): then its two listening
ports are the pair, and the probe tells which one serves metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ROUTER_TITLE", "api_ports", "titled_router"]

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
