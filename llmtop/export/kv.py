"""The exporter's KV series (``llmtop_kv_*``): an engine row's P/D KV transfer
(``kv_transfer``) and KV offload tiers (``kv_tiers``) as samples. Read only, like ``view``:
a key the row lacks, or one that is ``None``, gives no sample, never 0. The engine's own
total has no ``tier`` label; a secondary tier's series has one (like ``rank``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmtop.model import EngineRow

__all__ = ["KV_DIRECTIONS", "kv"]

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
"""series -> (``kv_tiers`` key, ``direction`` label)."""
_TRANSFER = (("llmtop_kv_transfer_latency_now_seconds", "latency_now_s"),
             ("llmtop_kv_transfer_bytes_per_second", "bytes_per_s"),
             ("llmtop_kv_transfer_failures_per_second", "failures_per_s"),
             ("llmtop_kv_transfer_expired_per_second", "expired_per_s"))
_TIERS = (("llmtop_kv_offload_hit_ratio", "hit_rate"),
          ("llmtop_kv_offload_usage_ratio", "usage"),
          ("llmtop_kv_offload_used_bytes", "used_bytes"),
          ("llmtop_kv_offload_used_tokens", "used_tokens"),
          ("llmtop_kv_offload_pinned_ratio", "pinned"),
          ("llmtop_kv_offload_failures_per_second", "failures_per_s"))
_PER_TIER = (("llmtop_kv_offload_hit_ratio", "hit_rate", None),
             ("llmtop_kv_offload_bytes_per_second", "offload_bytes_per_s", "offload"),
             ("llmtop_kv_offload_bytes_per_second", "load_back_bytes_per_s", "load_back"),
             ("llmtop_kv_offload_failures_per_second", "failures_per_s", None))


def _transfer(out: Any, kt: dict[str, Any], labels: Mapping[str, str | None]) -> None:
    out.quantiles("llmtop_kv_transfer_seconds", labels, kt.get("time_s"))
    for name, key in _TRANSFER:
        out.add(name, labels, kt.get(key))
    for queue, n in (kt.get("queues") or {}).items():
        out.add("llmtop_kv_transfer_queue_requests", {**labels, "queue": queue}, n)
    for stage, q in (kt.get("stages") or {}).items():
        out.quantiles("llmtop_kv_transfer_stage_seconds", {**labels, "stage": stage}, q)
    for source, v in (kt.get("prompt_tokens_by_source") or {}).items():
        out.add("llmtop_kv_prompt_tokens_per_second", {**labels, "source": source}, v)


def _tiers(out: Any, kt: dict[str, Any], labels: Mapping[str, str | None]) -> None:
    for name, key in _TIERS:
        out.add(name, labels, kt.get(key))
    for name, pairs in KV_DIRECTIONS.items():
        for key, direction in pairs:
            out.add(name, {**labels, "direction": direction}, kt.get(key))
    for tier, v in (kt.get("cached_tokens_per_s") or {}).items():
        out.add("llmtop_kv_cache_hit_tokens_per_second", {**labels, "tier": tier}, v)
    for tier, d in (kt.get("tiers") or {}).items():
        for name, key, direction in _PER_TIER:
            tl = {**labels, "tier": tier} | ({"direction": direction} if direction else {})
            out.add(name, tl, d.get(key))


def kv(out: Any, row: EngineRow, labels: Mapping[str, str | None]) -> None:
    """Add ``row``'s KV transfer and offload tier samples to ``out`` (``view._Out``)."""
    if row.kv_transfer:
        _transfer(out, row.kv_transfer, labels)
    if row.kv_tiers:
        _tiers(out, row.kv_tiers, labels)
