"""llama.cpp ``llama-server`` ``/metrics`` (``llamacpp:*``, needs ``--metrics``; METRICS.md §9).

No labels: one model per process, named from identity (``/props`` ``model_path``,
``/v1/models``) or "default". ``requests_processing`` -> running, ``requests_deferred`` ->
waiting, ``prompt_tokens_total``/``tokens_predicted_total`` -> token counters, old builds'
``kv_cache_usage_ratio`` -> kv_usage. The throughput gauges (reset by scrapes in some builds)
and the other counters only go to ``extra``. ``identity["total_slots"]`` (``/props``) ->
max_running.

The ``Process-Start-Time-Unix`` header is not a unix time, whatever its name: llama-server
sends ``ggml_time_us()`` at start, the host's monotonic clock in microseconds (a real build
sent ``2981792143`` on a machine up 50 min). So ``start_time`` stays None (no uptime), and the
value goes to ``extra["process_start_mark"]``: it changes only when the process restarts,
which ``history.derive.restart_reason`` reads.

Prefix cache (recent builds, ``server-task.cpp`` ``to_metrics``): ``prompt_tokens_cached_total``
counts prompt tokens reused from the cache, and ``prompt_tokens_total`` then counts only the
computed ones. With the cached counter, ``prompt_tokens`` = computed + cached (vLLM's meaning:
every prompt token), ``prefix_hits`` = cached and ``prefix_queries`` = computed + cached, so the
windowed hit rate is Δcached / (Δcached + Δcomputed). Without it (older builds)
``prompt_tokens`` is ``prompt_tokens_total`` and there is no hit rate.

Speculative decoding: ``spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total`` ->
``spec_drafts``/``spec_draft_tokens``/``spec_accepted_tokens`` (0 without a draft model: the
history gives no acceptance rate for a window without drafts).
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse.common import identity_model, identity_version, is_finite, sample_index
from llmtop.parse.exposition import ParseError, Sample, parse

__all__ = ["normalize"]

_GAUGES = {
    "llamacpp:requests_processing": "running",
    "llamacpp:requests_deferred": "waiting",
    "llamacpp:kv_cache_usage_ratio": "kv_usage",
}
_COUNTERS = {
    "llamacpp:prompt_tokens": "prompt_tokens",
    "llamacpp:tokens_predicted": "generation_tokens",
    "llamacpp:spec_decode_num_drafts": "spec_drafts",
    "llamacpp:spec_decode_num_draft_tokens": "spec_draft_tokens",
    "llamacpp:spec_decode_num_accepted_tokens": "spec_accepted_tokens",
}
_EXTRA = {
    "llamacpp:prompt_seconds": "prompt_seconds_total",
    "llamacpp:tokens_predicted_seconds": "tokens_predicted_seconds_total",
    "llamacpp:n_decode": "n_decode_total",
    "llamacpp:n_tokens_max": "n_tokens_max",
    "llamacpp:n_busy_slots_per_decode": "n_busy_slots_per_decode",
    "llamacpp:prompt_tokens_seconds": "prompt_tokens_per_s",
    "llamacpp:predicted_tokens_seconds": "predicted_tokens_per_s",
    "llamacpp:kv_cache_tokens": "kv_cache_tokens",
}


def _value(idx: dict[str, list[Sample]], name: str) -> float | None:
    for s in idx.get(name, ()):
        if is_finite(s.value):
            return s.value
    return None


def start_time_from_headers(headers: dict[str, str] | None) -> float | None:
    """``Process-Start-Time-Unix`` (any case) as a float, or None: a process mark (monotonic
    microseconds at start), not a unix time."""
    if not headers:
        return None
    for k, v in headers.items():
        if k.lower() == "process-start-time-unix":
            try:
                t = float(v)
            except (TypeError, ValueError):
                return None
            return t if is_finite(t) and t > 0 else None
    return None


def _build_info(identity: dict[str, Any] | None) -> str | None:
    """``/props`` ``build_info`` (e.g. ``b4567-1a2b3c4d``) when no version was learned."""
    v = (identity or {}).get("build_info")
    return v if isinstance(v, str) and v else None


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """llama.cpp ``/metrics`` text -> ``EngineSample(engine="llamacpp")``."""
    fams = parse(body, want=lambda n: n.startswith("llamacpp:"))
    idx = sample_index(fams)
    if not fams:
        raise ParseError("no llamacpp:* series")
    m = ModelSample(model=identity_model(identity))
    for name, key in _GAUGES.items():
        v = _value(idx, name)
        if v is not None:
            m.gauges[key] = v
    for name, key in _COUNTERS.items():
        v = _value(idx, name)
        if v is not None:
            m.counters[key] = v
    cached = _value(idx, "llamacpp:prompt_tokens_cached")
    computed = m.counters.get("prompt_tokens")
    if cached is not None and computed is not None:
        m.counters["prompt_tokens"] = computed + cached
        m.counters["prefix_hits"] = cached
        m.counters["prefix_queries"] = computed + cached
    slots = (identity or {}).get("total_slots")
    if isinstance(slots, (int, float)) and not isinstance(slots, bool) and slots > 0:
        m.gauges["max_running"] = float(slots)
    extra: dict[str, Any] = {}
    mark = start_time_from_headers(headers)
    if mark is not None:
        extra["process_start_mark"] = mark
    for name, key in _EXTRA.items():
        v = _value(idx, name)
        if v is not None:
            extra[key] = v
    return EngineSample(
        engine="llamacpp",
        version=identity_version(identity) or _build_info(identity),
        models=[m],
        extra=extra,
    )
