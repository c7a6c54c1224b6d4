"""The exporter's router series (``llmtop_router_*``): one router row (``model.stack``) and
its backends as samples. Read only, like ``view``: what a router does not report is absent,
never 0."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llmtop.model.stack import RouterRow

__all__ = ["LATENCY_KINDS", "routers"]

LATENCY_KINDS = (("request", "request_s"), ("ttft", "ttft_s"),
                 ("decode_pending", "decode_pending_s"))
"""``kind`` label of ``llmtop_router_latency_seconds`` -> ``RouterRow`` field."""


def _flag(v: bool | None) -> float | None:
    return None if v is None else 1.0 if v else 0.0


def routers(out: Any, rows: Iterable[RouterRow], good: tuple[str, ...]) -> None:
    """Add every router's samples to ``out`` (``view._Out``)."""
    for r in rows:
        labels = {"target": r.target, "engine": r.engine}
        out.add("llmtop_router_up", labels, 1.0 if r.state in good else 0.0)
        out.add("llmtop_router_info", {**labels, "version": r.engine_version,
                                       "policy": r.policy}, 1.0)
        if r.state not in good:
            continue  # no fresh numbers: up says why
        out.add("llmtop_router_requests_per_second", labels, r.requests_per_s)
        out.add("llmtop_router_retries_per_second", labels, r.retries_per_s)
        out.add("llmtop_router_errors_per_second", labels, r.errors_per_s)
        out.add("llmtop_router_backends", labels, r.total_backends)
        out.add("llmtop_router_backends_healthy", labels, r.healthy_backends)
        out.add("llmtop_router_open_breakers", labels, r.open_breakers)
        for kind, attr in LATENCY_KINDS:
            out.quantiles("llmtop_router_latency_seconds", {**labels, "kind": kind},
                          getattr(r, attr))
        for b in r.backends:
            bl = {**labels, "backend": b.url, "backend_target": b.target, "role": b.role}
            out.add("llmtop_router_backend_routed_ratio", bl, b.routed_share)
            out.add("llmtop_router_backend_requests_per_second", bl, b.requests_per_s)
            out.add("llmtop_router_backend_capacity_ratio", bl, b.capacity_share)
            out.add("llmtop_router_backend_healthy", bl, _flag(b.healthy))
            out.add("llmtop_router_backend_breaker_open", bl, _flag(b.breaker_open))
