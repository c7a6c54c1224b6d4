"""A place an engine may answer, before it is probed: ``Candidate`` and the host to dial.

- ``Candidate``: host, port, engine (when known), whether it is certain, its container and
  a router's serving port.
- ``connect_host(bound_ip, host)``: where this host dials a socket bound to ``bound_ip``.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmtop.model import Container

__all__ = ["LOCAL_BINDS", "Candidate", "connect_host"]

LOCAL_BINDS = ("0.0.0.0", "::", "127.0.0.1", "::ffff:0.0.0.0")
"""Bound addresses this host reaches at its own loopback."""


@dataclass(slots=True)
class Candidate:
    """A (host, port) that may be an engine."""

    host: str
    port: int
    engine: str | None
    certain: bool
    """Known to be the engine's listening HTTP port (no probe needed)."""
    container: Container | None = None
    """Its container, pod or namespace (engines outside the host's network)."""
    api_port: int | None = None
    """A router's serving port when its metrics port differs (its worker list is there)."""
    pid: int | None = None
    """The listening process on this machine (finding its log), when known."""


def connect_host(ip: str | None, host: str) -> str:
    """Where ``host`` dials a socket bound to ``ip`` (the wildcard and loopback: ``host``)."""
    if ip is None or ip in LOCAL_BINDS or ip.startswith("127."):
        return host
    if ip == "::1":
        return "::1"
    return ip
