"""KV transfer (P/D) and KV offload tiers, read by the vLLM and SGLang adapters.

Keys put on ``ModelSample`` (absent = not exported, never 0):

- hist ``kv_xfer`` (s): vLLM ``vllm:nixl_xfer_time_seconds``; SGLang
  ``sglang:kv_transfer_latency_ms`` where it is a histogram (gauge ``kv_xfer_latency_s`` where
  an older build exports it as a gauge);
- counters ``kv_xfer_bytes`` (``vllm:nixl_bytes_transferred`` sum, ``sglang:kv_transfer_total_mb``
  sum), ``kv_xfer_failed`` (``vllm:nixl_num_failed_transfers`` + ``..._notifications``;
  ``sglang:num_bootstrap_failed_reqs`` + ``num_transfer_failed_reqs``), ``kv_expired``
  (``vllm:nixl_num_kv_expired_reqs``); labelled counters (``ModelSample.counters_by``)
  ``prompt_tokens`` by source (``vllm:prompt_tokens_by_source``), ``cached_tokens`` by tier
  (device, host, disk, p2p: ``vllm:prompt_tokens_cached_by_source``, vLLM 0.33: which KV
  tier served the cache hits);
- labelled gauges ``kv_queue`` by queue (SGLang's P/D queues: prefill
  bootstrap/prealloc/inflight, decode prealloc/transfer);
- labelled hists ``kv_stage`` by stage (s): SGLang's ``sglang:kv_transfer_bootstrap_ms``
  (``bootstrap``),
  ``sglang:kv_transfer_alloc_ms`` (``alloc``) and the P/D stages of
  ``sglang:per_stage_req_latency_seconds{stage}`` (``PD_STAGES``);
- tiers: LMCache (``lmcache:*`` on vLLM's port) gauges ``tier_hit_rate``, ``tier_used_bytes``,
  counters ``tier_hit_tokens``, ``tier_queried_tokens``, ``tier_stored_tokens``; SGLang HiCache
  gauges ``tier_used_tokens``, ``tier_total_tokens``, counters ``tier_evicted_tokens``,
  ``tier_load_back_tokens``;
- info ``kv_role`` (``prefill`` | ``decode``) from SGLang's ``engine_type`` label.

Sources: vLLM ``NixlPromMetrics`` (nixl connector) and ``docs/usage/metrics.md``; LMCache
``lmcache/observability.py``; SGLang ``python/sglang/srt/observability/metrics_collector.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmtop.parse.exposition import Family

__all__ = ["PD_STAGES", "SGLANG_FAMILIES", "VLLM_FAMILIES", "read_sglang", "read_vllm"]

_NIXL_FAILED = ("vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_notifications")
_LMC_GAUGES = {"lmcache:retrieve_hit_rate": "tier_hit_rate",
               "lmcache:local_cache_usage": "tier_used_bytes"}
_LMC_COUNTERS = {"lmcache:num_hit_tokens": "tier_hit_tokens",
                 "lmcache:num_requested_tokens": "tier_queried_tokens",
                 "lmcache:num_stored_tokens": "tier_stored_tokens"}
VLLM_FAMILIES = frozenset({"vllm:nixl_xfer_time_seconds", "vllm:nixl_bytes_transferred",
                           *_NIXL_FAILED, "vllm:nixl_num_kv_expired_reqs",
                           "vllm:prompt_tokens_by_source", "vllm:prompt_tokens_cached_by_source",
                           *_LMC_GAUGES, *_LMC_COUNTERS})
"""Families the vLLM adapter keeps for this module."""

_SG_QUEUES = ("num_prefill_bootstrap_queue_reqs", "num_prefill_prealloc_queue_reqs",
              "num_prefill_inflight_queue_reqs", "num_decode_prealloc_queue_reqs",
              "num_decode_transfer_queue_reqs")
_SG_FAILED = ("num_bootstrap_failed_reqs", "num_transfer_failed_reqs")
_SG_TIER_GAUGES = {"hicache_host_used_tokens": "tier_used_tokens",
                   "hicache_host_total_tokens": "tier_total_tokens"}
_SG_TIER_COUNTERS = {"evicted_tokens": "tier_evicted_tokens",
                     "load_back_tokens": "tier_load_back_tokens"}
_SG_STAGE_HISTS = {"kv_transfer_bootstrap_ms": "bootstrap", "kv_transfer_alloc_ms": "alloc"}
PD_STAGES = ("prefill_bootstrap", "prefill_transfer_kv_cache", "decode_bootstrap",
             "decode_transferred")
"""SGLang's P/D stages of ``sglang:per_stage_req_latency_seconds{stage}`` (``req_time_stats``):
prefill side bootstrap queue -> wait queue, KV send; decode side prealloc queue -> transfer
queue (bootstrap + KV allocation), transfer queue -> wait queue (the KV arriving)."""
SGLANG_FAMILIES = frozenset("sglang:" + n for n in (
    *_SG_QUEUES, *_SG_FAILED, "kv_transfer_latency_ms", "kv_transfer_total_mb",
    *_SG_STAGE_HISTS, "per_stage_req_latency_seconds",
    *_SG_TIER_GAUGES, *_SG_TIER_COUNTERS))
"""Families the SGLang adapter keeps for this module."""

Put = Callable[..., None]
"""``put(kind, name, {group: value}, label=None)``: the adapter's setter (``common.put_value``)."""
Values = Callable[..., dict[Any, float]]
Hists = Callable[..., dict[Any, Any]]


def _sum(*parts: dict[Any, float]) -> dict[Any, float]:
    out: dict[Any, float] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _everywhere(values: Values, fam: Family | None, keys: list[Any], suffix: str
                ) -> dict[Any, float]:
    """LMCache's series carry their own labels: their sum goes to every model of the target
    (one model per vLLM server)."""
    total = values(fam, lambda _lb: "all", suffix=suffix)
    return {k: total["all"] for k in keys} if "all" in total else {}


def read_vllm(families: dict[str, Family], key: Callable[..., Any], put: Put,
              values: Values, hists: Hists, keys: list[Any]) -> None:
    """Put the vLLM KV-transfer and LMCache keys (see the module doc). ``keys``: the
    (model, rank) groups already found, for series without vLLM's labels."""
    get = families.get
    put("hists", "kv_xfer", hists(get("vllm:nixl_xfer_time_seconds"), key))
    put("counters", "kv_xfer_bytes", values(get("vllm:nixl_bytes_transferred"), key,
                                            suffix="_sum"))
    if any(get(n) is not None for n in _NIXL_FAILED):
        put("counters", "kv_xfer_failed", _sum(*(values(get(n), key) for n in _NIXL_FAILED)))
    put("counters", "kv_expired", values(get("vllm:nixl_num_kv_expired_reqs"), key))
    for fam_name, family in (("vllm:prompt_tokens_by_source", "prompt_tokens"),
                             ("vllm:prompt_tokens_cached_by_source", "cached_tokens")):
        src = get(fam_name)
        if src is None:
            continue
        for source in {s.labels.get("source", "") for s in src.samples} - {""}:
            put("counters", family, values(
                src, lambda lb, s=source: key(lb) if lb.get("source") == s else None),
                label=source)
    for name, gkey in _LMC_GAUGES.items():
        put("gauges", gkey, _everywhere(values, get(name), keys, ""))
    for name, ckey in _LMC_COUNTERS.items():
        put("counters", ckey, _everywhere(values, get(name), keys, "_total"))


def read_sglang(families: dict[str, Family], key: Callable[..., Any], put: Put,
                values: Values, hists: Hists) -> None:
    """Put the SGLang disaggregation and HiCache keys (see the module doc)."""
    p = "sglang:"
    get = families.get
    def pd_key(labels: dict[str, str]) -> Any:  # a unified engine has no P/D queues
        return None if labels.get("engine_type") == "unified" else key(labels)

    for name in _SG_QUEUES:
        short = name.removeprefix("num_").removesuffix("_queue_reqs")
        put("gauges", "kv_queue", values(get(p + name), pd_key, suffix=""), label=short)
    if any(get(p + n) is not None for n in _SG_FAILED):
        put("counters", "kv_xfer_failed", _sum(*(values(get(p + n), key) for n in _SG_FAILED)))
    lat = get(p + "kv_transfer_latency_ms")
    if lat is not None and lat.type == "histogram":
        put("hists", "kv_xfer", hists(lat, key, scale=1e-3))
    elif lat is not None:
        ms = values(lat, key, suffix="")
        put("gauges", "kv_xfer_latency_s", {k: v / 1000 for k, v in ms.items()})
    for name, stage in _SG_STAGE_HISTS.items():
        fam = get(p + name)
        if fam is not None and fam.type == "histogram":
            put("hists", "kv_stage", hists(fam, key, scale=1e-3), label=stage)
    per_stage = get(p + "per_stage_req_latency_seconds")
    for stage in PD_STAGES:
        put("hists", "kv_stage", hists(per_stage, lambda lb, s=stage: key(lb)
                                       if lb.get("stage") == s else None), label=stage)
    mb = get(p + "kv_transfer_total_mb")
    if mb is not None and mb.type == "histogram":
        put("counters", "kv_xfer_bytes", {k: v * 1e6 for k, v in values(
            mb, key, suffix="_sum").items()})
    for name, gkey in _SG_TIER_GAUGES.items():
        put("gauges", gkey, values(get(p + name), key, suffix=""))
    for name, ckey in _SG_TIER_COUNTERS.items():
        put("counters", ckey, values(get(p + name), key))
    roles: dict[Any, str] = {}
    for fam in families.values():
        for s in fam.samples:
            et = s.labels.get("engine_type")
            if et in ("prefill", "decode") and (k := key(s.labels)) is not None:
                roles[k] = et
        if roles:
            break
    put("info", "kv_role", roles)
