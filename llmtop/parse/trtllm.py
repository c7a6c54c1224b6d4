"""TensorRT-LLM ``trtllm-serve`` -> ``EngineSample`` (METRICS.md §7). JSON or text, by content.

``GET /metrics`` is a **JSON list of iteration-stat dicts** (at most the 2 most recent
iterations per call; an idle server returns ``[]``). The newest entry (highest ``iter``)
gives the gauges: running ``numActiveRequests``, waiting ``numQueuedRequests``, max_running
``maxNumActiveRequests``, kv_usage ``usedNumBlocks/maxNumBlocks``, kv_capacity_tokens
``maxNumBlocks*tokensPerBlock``. ``kvCacheStats.reusedBlocks``/``missedBlocks`` are the
KV manager's cumulative totals (``getNumReusedBlocks()``; its ``cacheHitRate`` is computed
from them; per-iteration deltas live in ``kvCacheIterationStats`` as ``iter*``), so they
become the counters ``prefix_hits``/``prefix_queries`` in tokens (blocks x tokensPerBlock);
``cacheHitRate`` is kept as ``prefix_hit_rate_gauge``. No request or token counters exist in
this payload (per-iteration values would be lost between polls).
Memory use, latencies and batching stats go to ``extra``.

``GET /prometheus/metrics`` uses ``trtllm_X`` names; Dynamo re-exports ``trtllm:X``; TRT-LLM
1.1.0rc5 exposed bare ``X`` (labels ``model_name``, ``engine_type``). All three are read the
same way, prefixed names winning. ``model_name="undefined"`` (what ``openai_server.py``
sets) is replaced by the identity model. ``time_per_output_token_seconds`` is observed once
per request, so it maps to ``tpot``. Prefix counters come from the cumulative
``kv_cache_iter_{reused,missed}_blocks`` (x tokens per block), else from
``prompt_cached_tokens``/``prompt_tokens``. Newer collectors also give the phase histograms
``request_{prefill,decode,inference}_time_seconds`` -> ``prefill``/``decode``/``inference``,
``max_num_active_requests`` -> max_running and the speculative-decoding counters
``spec_decode_num_{draft,accepted}_tokens`` -> ``spec_draft_tokens``/``spec_accepted_tokens``
(no count of draft rounds exists).
"""

from __future__ import annotations

import json
import math
from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse import common
from llmtop.parse.common import (
    add_value,
    hist_family,
    identity_model,
    identity_version,
    is_finite,
    sample_index,
)
from llmtop.parse.exposition import ParseError, Sample, parse

__all__ = ["normalize"]

_PREFIXES = ("trtllm_", "trtllm:")
_UNDEFINED = ("", "undefined")

_TEXT_GAUGES = {
    "num_requests_running": "running",
    "num_requests_waiting": "waiting",
    "kv_cache_utilization": "kv_usage",
    "kv_cache_hit_rate": "prefix_hit_rate_gauge",
    "max_num_active_requests": "max_running",
}
_TEXT_COUNTERS = {
    "prompt_tokens": "prompt_tokens",
    "generation_tokens": "generation_tokens",
    "spec_decode_num_draft_tokens": "spec_draft_tokens",
    "spec_decode_num_accepted_tokens": "spec_accepted_tokens",
}
_TEXT_HISTS = {
    "e2e_request_latency_seconds": "e2e",
    "time_to_first_token_seconds": "ttft",
    "time_per_output_token_seconds": "tpot",
    "request_queue_time_seconds": "queue",
    "request_prefill_time_seconds": "prefill",
    "request_decode_time_seconds": "decode",
    "request_inference_time_seconds": "inference",
}
_TEXT_EXTRA = {
    "gpu_memory_usage_bytes": "gpu_memory_usage_bytes",
    "num_requests_completed": "num_requests_completed",
    "kv_cache_free_blocks": "kv_cache_free_blocks",
    "kv_cache_used_blocks": "kv_cache_used_blocks",
    "kv_cache_max_blocks": "kv_cache_max_blocks",
}


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """trtllm-serve ``/metrics`` JSON or ``/prometheus/metrics`` text -> ``EngineSample``."""
    head = body.lstrip()[:1]
    if head in ("[", "{"):
        return _from_json(body, identity)
    return _from_text(body, identity)


# ----------------------------------------------------------------------------- JSON


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if is_finite(f) else None


def _from_json(body: str, identity: dict[str, Any] | None) -> EngineSample:
    try:
        data = json.loads(body)
    except RecursionError:
        raise ParseError("trtllm-serve /metrics: JSON nested too deep") from None
    except ValueError as exc:
        raise ParseError(f"not JSON: {str(exc)[:100]}") from exc
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise ParseError("trtllm-serve /metrics: expected a list of iteration-stat objects")
    if data and not any(("iter" in d or "kvCacheStats" in d or "numActiveRequests" in d)
                        for d in data):
        raise ParseError("trtllm-serve /metrics: no iteration stats in the objects")
    m = ModelSample(model=identity_model(identity))
    extra: dict[str, Any] = {"iterations": len(data)}
    if data:
        last = max(data, key=lambda d: _num(d.get("iter")) or -math.inf)
        _json_gauges(last, m, extra)
    return EngineSample(
        engine="trtllm", version=identity_version(identity), models=[m], extra=extra
    )


def _json_gauges(it: dict[str, Any], m: ModelSample, extra: dict[str, Any]) -> None:
    for key, gauge in (
        ("numActiveRequests", "running"),
        ("numQueuedRequests", "waiting"),
        ("maxNumActiveRequests", "max_running"),
    ):
        v = _num(it.get(key))
        if v is not None:
            m.gauges[gauge] = v
    kv = it.get("kvCacheStats")
    if isinstance(kv, dict):
        mx, used, tpb = (
            _num(kv.get("maxNumBlocks")),
            _num(kv.get("usedNumBlocks")),
            _num(kv.get("tokensPerBlock", kv.get("toksPerBlock"))),
        )
        if mx and used is not None:
            m.gauges["kv_usage"] = used / mx
        if mx is not None and tpb is not None:
            m.gauges["kv_capacity_tokens"] = mx * tpb
        reused, missed = _num(kv.get("reusedBlocks")), _num(kv.get("missedBlocks"))
        if reused is not None and missed is not None and tpb is not None:
            m.counters["prefix_hits"] = reused * tpb
            m.counters["prefix_queries"] = (reused + missed) * tpb
        rate = _num(kv.get("cacheHitRate"))
        if rate is not None:
            m.gauges["prefix_hit_rate_gauge"] = rate
        extra["kv_cache"] = {k: v for k, v in kv.items() if _num(v) is not None}
    for key in (
        "iter",
        "iterLatencyMS",
        "newActiveRequestsQueueLatencyMS",
        "numCompletedRequests",
        "numNewActiveRequests",
        "gpuMemUsage",
        "cpuMemUsage",
        "pinnedMemUsage",
        "maxBatchSizeRuntime",
        "maxNumTokensRuntime",
    ):
        v = _num(it.get(key))
        if v is not None:
            extra[key] = v
    if isinstance(it.get("timestamp"), (str, int, float)):
        extra["timestamp"] = it["timestamp"]
    ifb = it.get("inflightBatchingStats")
    if isinstance(ifb, dict) and ifb:
        extra["inflightBatchingStats"] = {k: v for k, v in ifb.items() if _num(v) is not None}


# ----------------------------------------------------------------------------- text


def _strip_index(idx: dict[str, list[Sample]]) -> dict[str, list[Sample]]:
    """Index by name without ``trtllm_``/``trtllm:``; prefixed names win over bare ones."""
    out: dict[str, list[Sample]] = {}
    for name, samples in idx.items():
        if not name.startswith(_PREFIXES):
            out[name] = samples
    for name, samples in idx.items():
        if name.startswith(_PREFIXES):
            base = name[len("trtllm_") :]
            strip = len(name) - len(base)
            out[base] = [Sample(s.name[strip:], s.labels, s.value) for s in samples]
    return out


def _from_text(body: str, identity: dict[str, Any] | None) -> EngineSample:
    idx = _strip_index(sample_index(parse(body)))
    known = (*_TEXT_GAUGES, *_TEXT_COUNTERS, "request_success", "kv_cache_tokens_per_block")
    hist_names = tuple(h + "_count" for h in _TEXT_HISTS)
    if not any(k in idx for k in known + hist_names):
        raise ParseError("no trtllm metrics in the payload")
    default = identity_model(identity)
    models: dict[str, ModelSample] = {}

    def model_of(s: Sample) -> ModelSample:
        name = s.labels.get("model_name", "")
        name = default if name in _UNDEFINED else name
        if name not in models:
            models[name] = ModelSample(model=name)
        return models[name]

    def values(name: str) -> list[tuple[ModelSample, Sample]]:
        return [(model_of(s), s) for s in idx.get(name, ()) if is_finite(s.value)]

    for name, key in _TEXT_GAUGES.items():
        for m, s in values(name):
            m.gauges[key] = m.gauges.get(key, 0.0) + s.value
    for name, key in _TEXT_COUNTERS.items():
        for m, s in values(name):
            m.counters[key] = m.counters.get(key, 0.0) + s.value
    for m, s in values("request_success"):
        m.counters["requests"] = m.counters.get("requests", 0.0) + s.value
        reason = s.labels.get("finished_reason")
        if reason:
            add_value(m, "counters", "finished", s.value, reason)
    for m, s in values("request_error"):
        m.counters["errors"] = m.counters.get("errors", 0.0) + s.value
    _text_kv(values, models)
    extra: dict[str, Any] = {}
    for name, key in _TEXT_EXTRA.items():
        for m, s in values(name):
            extra.setdefault(key, {})[m.model] = s.value
    for base, key in _TEXT_HISTS.items():
        fam = hist_family(idx, base)
        for (raw,), h in common.build_hists(fam, ("model_name",)).items():
            name = default if raw in _UNDEFINED else raw
            models.setdefault(name, ModelSample(model=name)).hists[key] = h
    if not models:
        models[default] = ModelSample(model=default)
    return EngineSample(
        engine="trtllm",
        version=identity_version(identity),
        models=[models[k] for k in sorted(models)],
        extra=extra,
    )


def _text_kv(values: Any, models: dict[str, ModelSample]) -> None:
    per: dict[str, dict[str, float]] = {}
    for name in (
        "kv_cache_max_blocks",
        "kv_cache_used_blocks",
        "kv_cache_tokens_per_block",
        "kv_cache_iter_reused_blocks",
        "kv_cache_iter_missed_blocks",
        "prompt_cached_tokens",
    ):
        for m, s in values(name):
            d = per.setdefault(m.model, {})
            d[name] = d.get(name, 0.0) + s.value
    for m, s in values("cache_config_info"):
        try:
            bs, nb = float(s.labels["block_size"]), float(s.labels["num_gpu_blocks"])
        except (KeyError, ValueError):
            continue
        per.setdefault(m.model, {}).setdefault("cache_config_capacity", bs * nb)
    for model, d in per.items():
        m = models[model]
        mx, used = d.get("kv_cache_max_blocks"), d.get("kv_cache_used_blocks")
        tpb = d.get("kv_cache_tokens_per_block")
        if "kv_usage" not in m.gauges and mx and used is not None:
            m.gauges["kv_usage"] = used / mx
        if mx is not None and tpb is not None:
            m.gauges["kv_capacity_tokens"] = mx * tpb
        elif "cache_config_capacity" in d:
            m.gauges["kv_capacity_tokens"] = d["cache_config_capacity"]
        reused, missed = d.get("kv_cache_iter_reused_blocks"), d.get("kv_cache_iter_missed_blocks")
        if reused is not None and missed is not None and tpb is not None:
            m.counters["prefix_hits"] = reused * tpb
            m.counters["prefix_queries"] = (reused + missed) * tpb
        elif "prompt_cached_tokens" in d and "prompt_tokens" in m.counters:
            m.counters["prefix_hits"] = d["prompt_cached_tokens"]
            m.counters["prefix_queries"] = m.counters["prompt_tokens"]
