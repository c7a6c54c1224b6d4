"""The exporter's KV series (``llmtop_kv_*``): an engine row's P/D KV transfer
(``KvTransfer``) and KV offload tiers (``KvTiers``) as samples. Read only, like ``view``:
a field that is ``None`` (not exported, or unknown) gives no sample, never 0. The engine's own
total has no ``tier`` label; a secondary tier's series has one (like ``rank``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmtop.model import EngineRow, KvTiers, KvTransfer

__all__ = ["KV_DIRECTIONS", "PER_TIER", "TIERS", "TRANSFER", "kv"]

KV_DIRECTIONS = {
    "llmtop_kv_offload_bytes_per_second": (("offload_bytes_per_s", "offload"),
                                           ("load_back_bytes_per_s", "load_back")),
    "llmtop_kv_offload_tokens_per_second": (("offload_tokens_per_s", "offload"),
                                            ("load_back_tokens_per_s", "load_back"),
                                            ("evicted_tokens_per_s", "evicted")),
    "llmtop_kv_offload_blocks_per_second": (("offload_blocks_per_s", "offload"),
                                            ("load_back_blocks_per_s", "load_back"),
                                            ("dropped_blocks_per_s", "dropped")),
}
"""series -> (``KvTiers`` field, ``direction`` label)."""
TRANSFER = (("llmtop_kv_transfer_latency_now_seconds", "latency_now_s"),
            ("llmtop_kv_transfer_bytes_per_second", "bytes_per_s"),
            ("llmtop_kv_transfer_failures_per_second", "failures_per_s"),
            ("llmtop_kv_transfer_expired_per_second", "expired_per_s"))
"""series -> ``KvTransfer`` field."""
TIERS = (("llmtop_kv_offload_hit_ratio", "hit_rate"),
         ("llmtop_kv_offload_usage_ratio", "usage"),
         ("llmtop_kv_offload_used_bytes", "used_bytes"),
         ("llmtop_kv_offload_used_tokens", "used_tokens"),
         ("llmtop_kv_offload_pinned_ratio", "pinned"),
         ("llmtop_kv_offload_failures_per_second", "failures_per_s"))
"""series -> ``KvTiers`` field (the engine's total: no ``tier`` label)."""
PER_TIER = (("llmtop_kv_offload_hit_ratio", "hit_rate", None),
            ("llmtop_kv_offload_bytes_per_second", "offload_bytes_per_s", "offload"),
            ("llmtop_kv_offload_bytes_per_second", "load_back_bytes_per_s", "load_back"),
            ("llmtop_kv_offload_failures_per_second", "failures_per_s", None))
"""(series, ``KvTier`` field, ``direction`` label or None) of each secondary tier."""


def _transfer(out: Any, kt: KvTransfer, labels: Mapping[str, str | None]) -> None:
    out.quantiles("llmtop_kv_transfer_seconds", labels, kt.time_s)
    for name, field in TRANSFER:
        out.add(name, labels, getattr(kt, field))
    for queue, n in (kt.queues or {}).items():
        out.add("llmtop_kv_transfer_queue_requests", {**labels, "queue": queue}, n)
    for stage, q in (kt.stages or {}).items():
        out.quantiles("llmtop_kv_transfer_stage_seconds", {**labels, "stage": stage}, q)
    for source, v in (kt.prompt_tokens_by_source or {}).items():
        out.add("llmtop_kv_prompt_tokens_per_second", {**labels, "source": source}, v)


def _tiers(out: Any, kt: KvTiers, labels: Mapping[str, str | None]) -> None:
    for name, field in TIERS:
        out.add(name, labels, getattr(kt, field))
    for name, pairs in KV_DIRECTIONS.items():
        for field, direction in pairs:
            out.add(name, {**labels, "direction": direction}, getattr(kt, field))
    for tier, v in (kt.cached_tokens_per_s or {}).items():
        out.add("llmtop_kv_cache_hit_tokens_per_second", {**labels, "tier": tier}, v)
    for tier, d in (kt.tiers or {}).items():
        for name, field, direction in PER_TIER:
            tl = {**labels, "tier": tier} | ({"direction": direction} if direction else {})
            out.add(name, tl, getattr(d, field))


def kv(out: Any, row: EngineRow, labels: Mapping[str, str | None]) -> None:
    """Add ``row``'s KV transfer and offload tier samples to ``out`` (``view._Out``)."""
    if row.kv_transfer is not None:
        _transfer(out, row.kv_transfer, labels)
    if row.kv_tiers is not None:
        _tiers(out, row.kv_tiers, labels)
