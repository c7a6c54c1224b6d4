"""Whether a sweep's SLA boundary is a ceiling, the one rule the probe's sentence, the
saved profile and ``compare`` share: a step above it that the load generator could drive
(not client-bound, not partial) failed the SLOs. Pure; reads the report's step dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["above_boundary", "boundary_bounded"]


def above_boundary(steps: Sequence[dict[str, Any]], sla: dict[str, Any] | None
                   ) -> list[dict[str, Any]]:
    """The whole steps at a higher load than a met SLA boundary's, client-bound or not."""
    if not sla or not sla.get("met"):
        return []
    key = "rate" if sla.get("rate") is not None else "concurrency"
    at = sla.get(key)
    if at is None:
        return []
    return [s for s in steps
            if (s.get(key) or 0) > at and s.get("requests") and not s.get("partial")]


def boundary_bounded(steps: Sequence[dict[str, Any]], sla: dict[str, Any] | None) -> bool:
    """Whether a met SLA boundary is a ceiling: a step above it that the generator could
    drive (not client-bound) failed the SLOs. A run whose every step passed, or whose steps
    above it were client-bound, only says "at least this much"."""
    return any(not s.get("client_bound") for s in above_boundary(steps, sla))
