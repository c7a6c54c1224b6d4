"""Value types of the serving stack: routers, their backends, roles.

A router target is parsed like an engine (``parse/<family>_router``), its adapter putting a
``RouterSample`` in ``EngineSample.extra["router"]``; the store derives a ``RouterRow`` per
router over a window (``history.routers``) and ``llmtop.topology`` links backends to engine
rows. ``None`` means "not reported", never zero. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from llmtop.model.values import Hist, Quantiles, json_number

__all__ = ["ROLES", "ROUTERS", "BackendRow", "BackendSample", "RouterRow", "RouterSample"]

ROUTERS = ("vllm-router", "sglang-router", "gie-epp", "llm-d-epp", "dynamo", "production-stack",
           "litellm")
"""Router family ids (``routers[].engine`` in ``--once --json``; hints ``vllm-router@host:port``).
A router target is parsed like an engine but gives a ``RouterRow``, not engine rows."""

ROLES = ("prefill", "decode", "both")
"""Serving roles of an engine or a router's backend (None: not known)."""


class _Values:
    """What the samples share: their reported numbers by field name (tests, debugging)."""

    __slots__ = ()

    def reported(self) -> dict[str, float]:
        """The numeric fields that hold a value (the rest: not reported)."""
        return {f.name: v for f in fields(self)
                if isinstance(v := getattr(self, f.name), float)}


@dataclass(slots=True)
class BackendSample(_Values):
    """One backend (worker URL) as its router reports it at one scrape: raw gauges and
    cumulative counters (rates are derived in ``history.routers``); None: not reported."""

    url: str
    role: str | None = None
    healthy: float | None = None
    """Gauge: 1 healthy, 0 not (LiteLLM: its deployment state is 0)."""
    breaker: float | None = None
    """Gauge: circuit breaker 0 closed, 1 open, 2 half open."""
    pending: float | None = None
    """Gauge: requests the router holds for it (decode-pending, queued at the pod)."""
    active: float | None = None
    """Gauge: requests running on it, as the router counts them."""
    load: float | None = None
    """Gauge: the vLLM router's load figure of the worker."""
    qps: float | None = None
    """Gauge: requests/s the router sends it (production-stack), where no counter says."""
    decode_blocks: float | None = None
    """Gauge: active decode KV blocks (Dynamo), summed over the worker's series."""
    prefill_tokens: float | None = None
    """Gauge: active prefill tokens (Dynamo)."""
    avg_latency_s: float | None = None
    """Gauge: the production-stack router's average latency of the server."""
    avg_itl_s: float | None = None
    """Gauge: the production-stack router's average inter-token latency of the server."""
    routed: float | None = None
    """Counter: requests routed to it."""
    prefill_routed: float | None = None
    """Counter: P/D prefill requests routed to it."""
    decode_routed: float | None = None
    """Counter: P/D decode requests routed to it."""
    failures: float | None = None
    """Counter: failed requests (circuit-breaker failure outcomes, LiteLLM failures)."""


@dataclass(slots=True)
class RouterSample(_Values):
    """What a router adapter extracts (``EngineSample.extra["router"]``): router-level
    counters, gauges and histograms (seconds), and its backends by URL; None: not reported."""

    policy: str | None = None
    requests: float | None = None
    """Counter: requests the router took (a P/D request once)."""
    retries: float | None = None
    """Counter."""
    errors: float | None = None
    """Counter: requests that failed at the router."""
    qps: float | None = None
    """Gauge: its own requests/s (production-stack: the backends' sum), where no counter."""
    active_workers: float | None = None
    """Gauge: workers it routes to."""
    ready_backends: float | None = None
    """Gauge: ready pods or endpoints (an endpoint picker)."""
    inflight: float | None = None
    """Gauge: requests in flight (LiteLLM, Dynamo)."""
    queued: float | None = None
    """Gauge: requests queued (Dynamo)."""
    pool_kv_usage: float | None = None
    """Gauge: the endpoint picker's pool-average KV usage, 0..1."""
    pool_queue: float | None = None
    """Gauge: the endpoint picker's pool-average queue size."""
    decode_pending_p95_router_window_s: float | None = None
    """Gauge: the router's own p95 of decode-pending time over its rolling window (a
    summary's ``quantile="0.95"``; ``RouterRow`` field and JSON of the same name)."""
    request: Hist | None = None
    """Request duration histogram."""
    ttft: Hist | None = None
    """Time-to-first-token histogram."""
    decode_pending: Hist | None = None
    """P/D decode-pending time (mean only where the router exports a summary)."""
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
            "routed_share": json_number(self.routed_share),
            "requests_per_s": json_number(self.requests_per_s),
            "pending": json_number(self.pending),
            "capacity_share": json_number(self.capacity_share),
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
    decode_pending_p95_router_window_s: float | None = None
    """The router's own p95 of decode-pending time (a summary quantile over the router's
    rolling window), not over llmtop's window."""
    backends: list[BackendRow] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def p95(q: Quantiles | None) -> float | None:
            return json_number(q.p95) if q is not None else None

        return {
            "target": self.target,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "state": self.state,
            "error": self.error,
            "policy": self.policy,
            "requests_per_s": json_number(self.requests_per_s),
            "healthy_backends": self.healthy_backends,
            "total_backends": self.total_backends,
            "open_breakers": self.open_breakers,
            "retries_per_s": json_number(self.retries_per_s),
            "errors_per_s": json_number(self.errors_per_s),
            "latency": {"request_p95_s": p95(self.request_s), "ttft_p95_s": p95(self.ttft_s),
                        "decode_pending_p95_s": p95(self.decode_pending_s),
                        "decode_pending_p95_router_window_s":
                            json_number(self.decode_pending_p95_router_window_s)},
            "backends": [b.to_json() for b in self.backends],
        }
