"""The serving-stack fields of an engine row over a window: KV transfer, KV tiers and how
long it has held requests without a new token (``tokens_idle_s``). Pure: no I/O, no clock.

Rates and quantiles come from counter and bucket deltas over the window (``derive``); a
counter reset clips the series, never giving a negative rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmtop.history.derive import counter_delta, counter_rate, hist_delta, hist_quantiles
from llmtop.model import EngineRow, KvTier, KvTiers, KvTransfer, ModelSample, Quantiles

__all__ = ["fill_kv_values", "tokens_idle_s"]

Points = Sequence[tuple[float, ModelSample]]


def _pts(pts: Points, key: str, label: str | None) -> list[tuple[float, float]]:
    if label is None:
        return [(t, v) for t, m in pts if (v := m.counters.get(key)) is not None]
    return [(t, v) for t, m in pts if (v := m.counters_by.get(key, {}).get(label)) is not None]


def _rate(pts: Points, key: str, label: str | None = None) -> float | None:
    """Rate of counter ``key`` (of labelled counter family ``key`` at ``label``)."""
    p = _pts(pts, key, label)
    return counter_rate(p) if len(p) >= 2 else None


def _delta(pts: Points, key: str, label: str | None = None) -> float | None:
    p = _pts(pts, key, label)
    d = counter_delta(p) if len(p) >= 2 else None
    return d[0] if d is not None else None


def _windowed(pts: Points, family: str, label: str) -> Quantiles | None:
    """Quantiles over the window of labelled histogram ``family`` at ``label``."""
    d = hist_delta([(t, h) for t, m in pts
                    if (h := m.hists_by.get(family, {}).get(label)) is not None])
    return None if d is None else hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)


def _kv_transfer(pts: Points) -> KvTransfer | None:
    last = pts[-1][1]
    out: dict[str, Any] = {}
    hp = [(t, h) for t, m in pts if (h := m.hists.get("kv_xfer")) is not None]
    if hp:
        d = hist_delta(hp)
        out["time_s"] = None if d is None else hist_quantiles(d.bounds, d.cumulative, d.sum,
                                                              d.count)
    if "kv_xfer_latency_s" in last.gauges:
        out["latency_now_s"] = last.gauges["kv_xfer_latency_s"]
    for key, name in (("kv_xfer_bytes", "bytes_per_s"), ("kv_xfer_failed", "failures_per_s"),
                      ("kv_expired", "expired_per_s")):
        if key in last.counters:
            out[name] = _rate(pts, key)
    stages = {stage: _windowed(pts, "kv_stage", stage)
              for stage in last.hists_by.get("kv_stage", {})}
    if stages:
        out["stages"] = stages
    queues = dict(last.gauges_by.get("kv_queue", {}))
    if queues:
        out["queues"] = queues
    by_source = last.counters_by.get("prompt_tokens", {})
    if by_source.get("external_kv_transfer"):  # a P/D engine: where its prompts came from
        # (an engine that never took KV from a transfer has hit rates)
        out["prompt_tokens_by_source"] = {src: _rate(pts, "prompt_tokens", src)
                                          for src in by_source}
    return KvTransfer.of(**out) if out else None


def _kv_tiers(pts: Points) -> KvTiers | None:
    last = pts[-1][1]
    g, c = last.gauges, last.counters
    out: dict[str, Any] = {}
    if "tier_hit_tokens" in c and "tier_queried_tokens" in c:
        hit, asked = _delta(pts, "tier_hit_tokens"), _delta(pts, "tier_queried_tokens")
        out["hit_rate"] = (min(1.0, hit / asked) if hit is not None and asked
                           else g.get("tier_hit_rate"))
    elif "tier_hit_rate" in g:
        out["hit_rate"] = g["tier_hit_rate"]
    if "tier_used_bytes" in g:
        out["used_bytes"] = g["tier_used_bytes"]
    if "tier_used_tokens" in g:
        out["used_tokens"] = g["tier_used_tokens"]
        total = g.get("tier_total_tokens")
        out["usage"] = g["tier_used_tokens"] / total if total else None
    cached = last.counters_by.get("cached_tokens", {})
    if any(v for tier, v in cached.items() if tier != "device"):  # hits served from an
        # offload tier (host, disk, p2p)
        out["cached_tokens_per_s"] = {tier: _rate(pts, "cached_tokens", tier)
                                      for tier in cached}
    out.update(_vllm_offload(pts))
    for key, name in (("tier_stored_tokens", "offload_tokens_per_s"),
                      ("tier_evicted_tokens", "evicted_tokens_per_s"),
                      ("tier_load_back_tokens", "load_back_tokens_per_s")):
        if key in c:
            out[name] = _rate(pts, key)
    return KvTiers.of(**out) if out else None


def _ratio(pts: Points, part: str, whole: str, label: str | None = None) -> float | None:
    hit, asked = _delta(pts, part, label), _delta(pts, whole, label)
    return min(1.0, hit / asked) if hit is not None and asked else None


def _vllm_offload(pts: Points) -> dict[str, Any]:
    """vLLM's offloading connector (``parse.kv_offload``): byte rates GPU <-> offload medium,
    failures, per secondary tier hit rate / offload / load-back, SimpleCPUOffload blocks
    (``KvTiers`` keyword arguments)."""
    last = pts[-1][1]
    g, c = last.gauges, last.counters
    out: dict[str, Any] = {}
    for key, name in (("offload_store_bytes", "offload_bytes_per_s"),
                      ("offload_load_bytes", "load_back_bytes_per_s"),
                      ("offload_failed", "failures_per_s"),
                      ("offload_stored_blocks", "offload_blocks_per_s"),
                      ("offload_load_blocks", "load_back_blocks_per_s"),
                      ("offload_dropped_blocks", "dropped_blocks_per_s")):
        if key in c:
            out[name] = _rate(pts, key)
    if "offload_pinned" in g:
        out["pinned"] = g["offload_pinned"]
    if "offload_used_blocks" in g:
        cap = g.get("offload_capacity_blocks")
        out["pinned"] = g["offload_used_blocks"] / cap if cap else None
    tiers: dict[str, dict[str, float | None]] = {}
    for family, per in last.counters_by.items():
        if family not in _TIER_KEYS:
            continue
        for tier in per:
            t = tiers.setdefault(tier, {})
            if family == "tier_chunk_queries":
                t["hit_rate"] = _ratio(pts, "tier_chunk_hits", family, tier)
            elif family != "tier_chunk_hits":
                t[_TIER_KEYS[family]] = _rate(pts, family, tier)
    if tiers:
        out["tiers"] = {name: KvTier.of(**t) for name, t in tiers.items()}
    return out


_TIER_KEYS = {"tier_chunk_queries": "hit_rate", "tier_chunk_hits": "hit_rate",
              "tier_write_bytes": "offload_bytes_per_s",
              "tier_read_bytes": "load_back_bytes_per_s", "tier_failed": "failures_per_s"}


def tokens_idle_s(pts: Points) -> float | None:
    """Seconds, up to the newest sample, that the engine held running or waiting requests
    while its generated-token counter did not move (nor its prompt-token counter: a long
    prefill is work) (0 when it moved in the newest interval
    or nothing is held); None without a generated-token counter or with one sample. Walks
    back only as far as the counter stood still."""
    if len(pts) < 2 or "generation_tokens" not in pts[-1][1].counters:
        return None
    t_end = pts[-1][0]
    since = t_end
    for (t0, a), (_t1, b) in zip(reversed(pts[:-1]), reversed(pts[1:]), strict=True):
        held = (b.gauges.get("running") or 0.0) + (b.gauges.get("waiting") or 0.0)
        if b.counters.get("generation_tokens") != a.counters.get("generation_tokens") \
                or b.counters.get("prompt_tokens") != a.counters.get("prompt_tokens") \
                or held <= 0:
            break  # a token made, a prompt chunk prefilled, or nothing held
        since = t0
    return t_end - since


def fill_kv_values(row: EngineRow, pts: Points) -> None:
    """Fill the KV values of ``row`` from its points: ``kv_transfer``, ``kv_tiers`` and
    ``tokens_idle_s``."""
    if not pts:
        return
    row.kv_transfer = _kv_transfer(pts)
    row.kv_tiers = _kv_tiers(pts)
    row.tokens_idle_s = tokens_idle_s(pts)
