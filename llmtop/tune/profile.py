"""The capacity profile of a tuner run: the best trial's SLA boundary (``docs/capacity.md``).

The tuner stops each trial's server, so the profile describes the recommended configuration
on its URL: an engine later started with ``best.command`` there is matched to it. Saved only
when the boundary is real (a higher level of that trial, one the load generator could drive,
missed the SLOs), as for a probe.
"""

from __future__ import annotations

import time
from typing import Any

from llmtop.capacity import Profile

__all__ = ["best_profile"]


def best_profile(report: dict[str, Any]) -> Profile | None:
    """The profile of ``report``'s best trial, or None (no best, or no real boundary)."""
    best = report.get("best") or {}
    trials = report.get("trials") or []
    i = best.get("trial")
    if not isinstance(i, int) or not 0 <= i < len(trials):
        return None
    t = trials[i]
    sla = t.get("sla_boundary") or {}
    rps = sla.get("requests_per_s")
    if not rps or rps <= 0 or not t.get("url"):
        return None
    if not any(not lv.get("met") and not lv.get("partial") and not lv.get("client_bound")
               and lv.get("load", 0) > sla["load"] for lv in t.get("levels") or []):
        # every level above met the SLOs, or missed them with the generator client-bound
        # (its numbers, not the server's): "at least this much", not a capacity
        return None
    applied = t.get("applied") or {}
    traffic = report.get("traffic") or {}
    return Profile(url=str(t["url"]), requests_per_s=float(rps),
                   output_tokens_per_s=sla.get("output_tokens_per_s"),
                   measured_unix=time.time(), model=applied.get("model"),
                   engine=applied.get("engine"), settings=dict(t.get("params") or {}),
                   slo=dict(report.get("slo") or {}),
                   shape={"prompt_mean": traffic.get("prompt_tokens"), "prompt_p90": None,
                          "output_mean": traffic.get("output_tokens"), "output_p90": None,
                          "prefix_hit_rate": None},
                   source="tune")
