"""vLLM's KV offloading series (``vllm:kv_offload_*``, ``vllm:simple_kv_offload_*``), read by
the vLLM adapter into ``ModelSample`` keys (absent = not exported, never 0):

- offloading connector (``OffloadingConnector``, vLLM ≥ 0.32): counters ``offload_store_bytes``
  (GPU → offload medium, ``vllm:kv_offload_store_bytes``; older builds
  ``vllm:kv_offload_total_bytes{transfer_type="GPU_to_CPU"}``), ``offload_load_bytes``
  (back to the GPU, ``..._load_bytes`` / ``transfer_type="CPU_to_GPU"``), ``offload_failed``
  (``vllm:kv_offload_allocation_failure``: store allocations that failed); gauge
  ``offload_pinned`` (``vllm:kv_offload_cpu_cache_usage_perc``: fraction of the CPU tier
  pinned by transfers in flight, a 0-1 fraction despite the name);
- its tiering spec (``TieringOffloadingSpec``), per ``tier`` label (``0:primary``, ``1:fs``…):
  labelled counters (``ModelSample.counters_by``, by tier) ``tier_chunk_queries``,
  ``tier_chunk_hits``, ``tier_read_bytes`` (read from the tier back into the primary:
  load-back), ``tier_write_bytes`` (written to it: offload), ``tier_failed`` (promotion +
  cascade job failures);
- ``SimpleCPUOffloadConnector``: counters ``offload_load_blocks``
  (``vllm:simple_kv_offload_load_blocks``), ``offload_stored_blocks`` /
  ``offload_dropped_blocks`` (``vllm:simple_kv_offload_save_outcomes{outcome}``: ``stored``,
  ``dropped_*``), gauges ``offload_used_blocks``, ``offload_capacity_blocks`` (the
  ``capacity_blocks`` label of ``vllm:simple_kv_offload_info``).

Source: vLLM 0.32.0 ``distributed/kv_transfer/kv_connector/v1/offloading/metrics.py``,
``v1/kv_offload/tiering/{base,spec,metrics}.py``, ``v1/kv_offload/cpu/common.py``,
``v1/simple_kv_offload/metrics.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmtop.parse.exposition import Family

__all__ = ["OFFLOAD_FAMILIES", "read_offload"]

_P = "vllm:kv_offload_"
_TIERED = {"chunk_queries": "tier_chunk_queries", "chunk_hits": "tier_chunk_hits",
           "read_bytes": "tier_read_bytes", "write_bytes": "tier_write_bytes"}
_TIER_FAILED = ("tiering_promotion_job_failures", "tiering_cascade_job_failures")
_SIMPLE = "vllm:simple_kv_offload_"
OFFLOAD_FAMILIES = frozenset({
    _P + "store_bytes", _P + "load_bytes", _P + "total_bytes", _P + "allocation_failure",
    _P + "cpu_cache_usage_perc", *(_P + "tiering_" + n for n in _TIERED),
    *(_P + n for n in _TIER_FAILED), _SIMPLE + "load_blocks", _SIMPLE + "save_outcomes",
    _SIMPLE + "used_blocks", _SIMPLE + "info"})
"""Families the vLLM adapter keeps for this module."""

Put = Callable[..., None]
Values = Callable[..., dict[Any, float]]


def _where(key: Callable[..., Any], label: str, ok: Callable[[str], bool]) -> Callable[..., Any]:
    return lambda lb: key(lb) if ok(lb.get(label, "")) else None


def _tiered(families: dict[str, Family], key: Callable[..., Any], put: Put,
            values: Values) -> None:
    fams = {n: families.get(_P + "tiering_" + n) for n in _TIERED}
    fails = [f for n in _TIER_FAILED if (f := families.get(_P + n)) is not None]
    tiers = {s.labels.get("tier", "") for f in (*fams.values(), *fails) if f is not None
             for s in f.samples} - {""}
    for tier in tiers:
        at = _where(key, "tier", tier.__eq__)
        for short, skey in _TIERED.items():
            if fams[short] is not None:
                put("counters", skey, values(fams[short], at), label=tier)
        if fails:
            got: dict[Any, float] = {}
            for f in fails:
                for k, v in values(f, at).items():
                    got[k] = got.get(k, 0.0) + v
            put("counters", "tier_failed", got, label=tier)


def read_offload(families: dict[str, Family], key: Callable[..., Any], put: Put,
                 values: Values) -> None:
    """Put the KV-offload keys of the module doc (nothing for a family not exported)."""
    get = families.get
    old = get(_P + "total_bytes")  # deprecated, by transfer_type
    for new, direction, skey in (("store_bytes", "GPU_to_CPU", "offload_store_bytes"),
                                 ("load_bytes", "CPU_to_GPU", "offload_load_bytes")):
        fam = get(_P + new)
        if fam is not None:
            put("counters", skey, values(fam, key))
        elif old is not None:
            put("counters", skey, values(old, _where(key, "transfer_type", direction.__eq__)))
    put("counters", "offload_failed", values(get(_P + "allocation_failure"), key))
    put("gauges", "offload_pinned", values(get(_P + "cpu_cache_usage_perc"), key, suffix=""))
    _tiered(families, key, put, values)
    put("counters", "offload_load_blocks", values(get(_SIMPLE + "load_blocks"), key))
    outcomes = get(_SIMPLE + "save_outcomes")
    if outcomes is not None:
        put("counters", "offload_stored_blocks",
            values(outcomes, _where(key, "outcome", "stored".__eq__)))
        put("counters", "offload_dropped_blocks", values(
            outcomes, _where(key, "outcome", lambda o: o.startswith("dropped"))))
    put("gauges", "offload_used_blocks", values(get(_SIMPLE + "used_blocks"), key, suffix=""))
    info = get(_SIMPLE + "info")
    if info is not None:
        cap: dict[Any, float] = {}
        for s in info.samples:
            k = key(s.labels)
            try:
                c = float(s.labels.get("capacity_blocks", ""))
            except ValueError:
                continue
            if k is not None and c > 0 and c != float("inf"):
                cap[k] = cap.get(k, 0.0) + c
        put("gauges", "offload_capacity_blocks", cap)
