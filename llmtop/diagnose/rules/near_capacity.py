"""``near_capacity``: the load nears the capacity a probe measured, before latency says so.

Reads the row's capacity fields (``llmtop.capacity`` fills them from a saved profile); no
profile, no finding."""

from __future__ import annotations

from llmtop.diagnose.context import RowCtx, fmt_pct, fmt_s
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.thresholds import CAP_CRIT, CAP_MIN_REQUESTS, CAP_WARN

__all__ = ["near_capacity"]

DAY_S = 86400.0


def _age(age_s: float | None) -> str:
    if age_s is None:
        return "–"
    return f"{age_s / DAY_S:.0f} d" if age_s >= DAY_S else f"{age_s / 3600:.1f} h"


def _slo(slo: dict) -> str:
    parts = [f"{k.upper()} p95 ≤ {fmt_s(v)}" for k, v in slo.items() if v is not None]
    return ", ".join(parts) or "no SLO"


def near_capacity(c: RowCtx) -> list[Finding]:
    """Request rate over the window at or above CAP_WARN of the profile's capacity."""
    row, prof, used = c.row, c.row.capacity, c.row.capacity_used
    if prof is None or used is None or used < CAP_WARN:
        return []
    rps = row.requests_per_s or 0.0
    if rps * c.window_s < CAP_MIN_REQUESTS:
        return []
    cap = prof["requests_per_s"]
    drift = [d["text"] for d in row.capacity_drift]
    stale = bool(prof.get("stale"))
    severity = "critical" if used >= CAP_CRIT else "warn"
    if drift or stale:
        severity = "info"
    summary = (f"{rps:.2f} req/s is {fmt_pct(used)} of the {cap:.2f} req/s this engine held "
               f"within {_slo(prof.get('slo') or {})} (measured {_age(prof.get('age_s'))} ago)")
    if drift:
        summary += "; but " + ", ".join(drift) + ": the profile may not hold"
    elif stale:
        summary += "; the profile is old: it may not hold"
    ev = [c.ev("requests_per_s", None, rps, baseline=False),
          c.ev("capacity_requests_per_s", None, cap, baseline=False),
          c.ev("capacity_used", CAP_CRIT if used >= CAP_CRIT else CAP_WARN, used,
               baseline=False),
          c.ev("slo", None, _slo(prof.get("slo") or {}), baseline=False),
          c.ev("profile_age_s", None, prof.get("age_s"), baseline=False),
          c.ev("drift", None, "; ".join(drift) or "none", baseline=False)]
    url = prof.get("url") or row.target
    if drift or stale:
        action = (f"re-measure: llmtop probe {url} --lengths-from {row.target} --sweep "
                  "(the traffic has changed since the profile)" if drift else
                  f"re-measure: llmtop probe {url} --sweep (the profile is old)")
    else:
        action = ("add a replica before the queue builds (or shed load): the SLOs held only "
                  "up to the measured capacity")
    return [c.finding("near_capacity", severity, summary, ev, action)]
