"""Match live rows to profiles and fill ``capacity_used``, ``capacity`` and
``capacity_drift`` (the bounds below are the ones ``docs/capacity.md`` states)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from llmtop.capacity.profile import Profile
from llmtop.model import GOOD_STATES, EngineRow, Quantiles

__all__ = ["DRIFT_HIT_ABS", "DRIFT_LEN_X", "DRIFT_MIN_REQUESTS", "STALE_AFTER_S",
           "annotate_rows", "annotate_totals", "capacity_text", "drift", "match"]

DRIFT_LEN_X = 1.5
"""Live mean prompt (or output) length over the profile's, or its inverse, at or above this
is drift: past 1.5× the prefill (or decode) work per request has moved enough that the
measured request rate no longer stands for the same load."""
DRIFT_HIT_ABS = 0.20
"""Prefix-hit rate 20 points away from the measured one is drift (a hit skips prefill)."""
DRIFT_MIN_REQUESTS = 5
"""Fewer finished requests in the window than this: no drift judged on lengths."""
STALE_AFTER_S = 7 * 86400.0
"""A profile older than a week is stale (engines, drivers and traffic move)."""


def capacity_text(r: EngineRow) -> str:
    """``62%``, ``62%~`` when the traffic drifted from the profile's shape (``112~`` when
    it would not fit 4 cells), ``–`` without a profile; never 0 for a missing one."""
    v = r.capacity_used
    if v is None:
        return "–"
    t = f"{v * 100:.0f}%"
    if r.capacity_drift:
        t = t + "~" if len(t) <= 3 else t[:-1] + "~"
    return t


def _netloc(url: str | None) -> str | None:
    if not url:
        return None
    return urlsplit(url if "//" in url else f"//{url}").netloc or None


def match(profiles: Sequence[Profile], *, url: str | None, model: str | None,
          engine: str | None = None, gpu: str | None = None) -> Profile | None:
    """The newest profile for this engine: same host:port and model; else (fleet mode,
    where URLs differ per replica) same model, engine and GPU type, all known."""
    net = _netloc(url)
    for p in profiles:  # newest first
        if net and p.netloc == net and (p.model is None or p.model == model):
            return p
    for p in profiles:
        if (model and p.model == model and engine and p.engine == engine
                and gpu and p.gpu == gpu):
            return p
    return None


def _mean(q: Quantiles | None) -> float | None:
    if q is None or q.count < DRIFT_MIN_REQUESTS:
        return None
    return q.mean


def drift(row: EngineRow, p: Profile) -> list[dict[str, Any]]:
    """How the live traffic differs from the profile's, past the bounds above."""
    out: list[dict[str, Any]] = []
    for what, q, key, word in (("prompt", row.prompt_len, "prompt_mean", "prompts"),
                               ("output", row.gen_len, "output_mean", "outputs")):
        live, then = _mean(q), p.shape.get(key)
        if live is None or not then or live <= 0:
            continue
        x = live / then
        if x >= DRIFT_LEN_X:
            out.append({"what": what, "ratio": x, "live": live, "measured": then,
                        "text": f"{word} {x:.1f}× longer than when measured"})
        elif x <= 1 / DRIFT_LEN_X:
            out.append({"what": what, "ratio": x, "live": live, "measured": then,
                        "text": f"{word} {1 / x:.1f}× shorter than when measured"})
    live_hit, then_hit = row.prefix_hit_rate, p.shape.get("prefix_hit_rate")
    if live_hit is not None and then_hit is not None and abs(live_hit - then_hit) >= DRIFT_HIT_ABS:
        out.append({"what": "prefix_hit_rate", "ratio": None, "live": live_hit,
                    "measured": then_hit,
                    "text": f"prefix hits {live_hit:.0%} (measured at {then_hit:.0%})"})
    return out


def _summary(p: Profile, now: float) -> dict[str, Any]:
    age = max(0.0, now - p.measured_unix) if now and p.measured_unix else None
    return {"requests_per_s": p.requests_per_s, "output_tokens_per_s": p.output_tokens_per_s,
            "slo": dict(p.slo), "shape": dict(p.shape), "measured_unix": p.measured_unix,
            "age_s": age, "stale": age is not None and age >= STALE_AFTER_S,
            "url": p.url, "engine": p.engine, "model": p.model, "gpu": p.gpu,
            "source": p.source, "path": p.path}


def annotate_rows(rows: Iterable[EngineRow], profiles: Sequence[Profile], now: float, *,
                  urls: dict[str, str] | None = None, gpus: dict[str, str] | None = None
                  ) -> None:
    """Fill the capacity fields of each row with a matching profile (``urls``: target name
    -> its URL, the name itself when absent; ``gpus``: target -> its GPU type, fleet mode).
    Rows without one keep None."""
    if not profiles:
        return
    for row in rows:
        url = (urls or {}).get(row.target) or row.target
        p = match(profiles, url=url, model=row.model, engine=row.engine,
                  gpu=(gpus or {}).get(row.target))
        if p is None:
            continue
        row.capacity = _summary(p, now)
        row.capacity_drift = drift(row, p)
        rps = row.requests_per_s
        row.capacity_used = rps / p.requests_per_s if rps is not None else None


def annotate_totals(totals: Iterable[EngineRow], rows: Sequence[EngineRow]) -> None:
    """Fleet mode, per model: the summed request rate over the summed capacity of its
    instances, when every instance of the model that is up has a profile (one without
    leaves the model's total ``–``: a partial sum would read as spare room)."""
    for t in totals:
        mine = [r for r in rows if r.model == t.model and r.state in GOOD_STATES]
        if not mine or any(r.capacity is None for r in mine) or t.requests_per_s is None:
            continue
        cap = sum(r.capacity["requests_per_s"] for r in mine)
        t.capacity = {"requests_per_s": cap, "instances": len(mine),
                      "output_tokens_per_s": None, "slo": {}, "shape": {},
                      "measured_unix": min(r.capacity["measured_unix"] for r in mine),
                      "age_s": max((r.capacity.get("age_s") or 0.0) for r in mine),
                      "stale": any(r.capacity.get("stale") for r in mine), "url": None,
                      "engine": t.engine, "model": t.model, "gpu": None, "source": "instances",
                      "path": None}
        t.capacity_drift = [d for r in mine for d in r.capacity_drift][:3]
        t.capacity_used = t.requests_per_s / cap
