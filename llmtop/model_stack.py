"""Value types of the serving stack: routers, their backends, roles (issue 42).

A router target is parsed like an engine (``parse/<family>_router``), its adapter putting a
``RouterSample`` in ``EngineSample.extra["router"]``; the store derives a ``RouterRow`` per
router over a window (``history.routers``) and ``llmtop.topology`` links backends to engine
rows. ``None`` means "not reported", never zero. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llmtop.model import Hist, Quantiles, _num

__all__ = ["ROLES", "ROUTERS", "BackendRow", "BackendSample", "RouterRow", "RouterSample"]

ROUTERS = ("vllm-router", "sglang-router", "gie-epp", "llm-d-epp", "dynamo", "production-stack",
           "litellm")
"""Router family ids (``routers[].engine`` in ``--once --json``; hints ``vllm-router@host:port``).
A router target is parsed like an engine but gives a ``RouterRow``, not engine rows."""

ROLES = ("prefill", "decode", "both")
"""Serving roles of an engine or a router's backend (None: not known)."""


@dataclass(slots=True)
class BackendSample:
    """One backend (worker URL) as its router reports it at one scrape. Raw values: gauges
    ``healthy`` (1/0), ``breaker`` (0 closed, 1 open, 2 half open), ``pending``, ``active``;
    counters ``routed``, ``prefill_routed``, ``decode_routed``, ``failures``."""

    url: str
    role: str | None = None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class RouterSample:
    """What a router adapter extracts (``EngineSample.extra["router"]``): router-level
    counters (``requests``, ``retries``, ``errors``), gauges (``active_workers``), histograms
    in seconds (``request``, ``ttft``, ``decode_pending``) and its backends by URL."""

    policy: str | None = None
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    hists: dict[str, Hist] = field(default_factory=dict)
    backends: dict[str, BackendSample] = field(default_factory=dict)


@dataclass(slots=True)
class BackendRow:
    """One backend of a router over one window (``routers[].backends[]`` in JSON)."""

    url: str
    target: str | None = None
    """The engine row's target for this URL when it is scraped (``llmtop.topology``)."""
    role: str | None = None
    healthy: bool | None = None
    breaker_open: bool | None = None
    routed_share: float | None = None
    """0..1 of the router's requests routed here in the window (None: no requests)."""
    requests_per_s: float | None = None
    pending: float | None = None
    """Requests the router holds for it (decode-pending, active), when it says."""
    capacity_share: float | None = None
    """Its share of the pool's capacity (running limit, else KV tokens), from its engine row."""
    capacity_basis: str | None = None
    """What ``capacity_share`` compares: ``seats`` (running limits) or ``kv`` (KV tokens)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "target": self.target,
            "role": self.role,
            "healthy": self.healthy,
            "breaker_open": self.breaker_open,
            "routed_share": _num(self.routed_share),
            "requests_per_s": _num(self.requests_per_s),
            "pending": _num(self.pending),
            "capacity_share": _num(self.capacity_share),
            "capacity_basis": self.capacity_basis,
        }


@dataclass(slots=True)
class RouterRow:
    """One router target over one window (``routers[]`` in ``--once --json``)."""

    target: str
    engine: str | None = None
    """Router family id (``ROUTERS``)."""
    engine_version: str | None = None
    state: str = "ok"
    error: str | None = None
    http_status: int | None = None
    last_ok_age_s: float | None = None
    policy: str | None = None
    requests_per_s: float | None = None
    retries_per_s: float | None = None
    errors_per_s: float | None = None
    healthy_backends: int | None = None
    total_backends: int | None = None
    open_breakers: int | None = None
    request_s: Quantiles | None = None
    ttft_s: Quantiles | None = None
    decode_pending_s: Quantiles | None = None
    decode_pending_p95_own_s: float | None = None
    """The router's own p95 of decode-pending time (a summary quantile over the router's
    rolling window, ~60 s for the vLLM router), not over llmtop's window."""
    backends: list[BackendRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def p95(q: Quantiles | None) -> float | None:
            return _num(q.p95) if q is not None else None

        return {
            "target": self.target,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "state": self.state,
            "error": self.error,
            "policy": self.policy,
            "requests_per_s": _num(self.requests_per_s),
            "healthy_backends": self.healthy_backends,
            "total_backends": self.total_backends,
            "open_breakers": self.open_breakers,
            "retries_per_s": _num(self.retries_per_s),
            "errors_per_s": _num(self.errors_per_s),
            "latency": {"request_p95_s": p95(self.request_s), "ttft_p95_s": p95(self.ttft_s),
                        "decode_pending_p95_s": p95(self.decode_pending_s),
                        "decode_pending_p95_router_window_s":
                            _num(self.decode_pending_p95_own_s)},
            "backends": [b.to_json() for b in self.backends],
        }
