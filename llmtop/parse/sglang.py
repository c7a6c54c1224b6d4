"""SGLang ``/metrics`` (``--enable-metrics``) -> ``EngineSample``, old and new names.

``docs/metrics.md`` ("SGLang") lists both. Multiprocess exposition: no ``_created``, no
``process_*``; gauges without a multiprocess mode carry a ``pid`` label (summed away).

* model label: ``model_name`` (v0.4+) | ``name`` (v0.3.5); ranks: ``dp_rank``
* only ``tp_rank``/``pp_rank``/``moe_ep_rank`` 0 (or absent) is read: with
  ``--enable-metrics-for-all-schedulers`` every TP rank repeats the same scheduler values
* other labels (``engine_type``, ``is_streaming``, ``pid``, ``cache_source``, ``priority``...)
  are summed over; NaN values are not reported (``sglang:fwd_occupancy`` is NaN when idle)
* running ``num_running_reqs``; waiting ``num_queue_reqs``; kv_usage ``token_usage`` (max);
  kv_capacity_tokens ``max_total_num_tokens``; max_running ``max_running_requests`` (old builds;
  else ``/server_info``'s ``max_running_requests``, ``identity["sglang"]``, when ``dp_size`` is
  1: with several DP schedulers the server argument's per-scheduler meaning is not certain)
* tokens, as the scheduler counts them each step (a real 0.5.23 server, seen on CPU):
  generation_tokens = ``realtime_tokens_total{mode="decode"}``, prompt_tokens = its
  ``prefill_compute`` + ``prefill_cache``. ``prompt_tokens_total``/``generation_tokens_total``
  (and ``cached_tokens_total``, ``num_requests_total``) only grow when a request finishes, so a
  window in which none finished read 0 tok/s while the server decoded; they are used only by
  builds without ``realtime_tokens``. Decode tokens miss each request's first token (made by
  its prefill), so generation_tokens = decode + ``num_requests_total``: at idle exactly
  ``generation_tokens_total`` (seen on the real server); under load it runs ahead of it by
  the tokens of the requests still in flight, short of their first tokens.
* prefix_hits = ``realtime_tokens_total{mode="prefill_cache"}`` over prefix_queries = the
  prompt_tokens above (a retracted request's re-prefill counts as computed, a miss); builds
  without ``realtime_tokens``: Σ ``cached_tokens_total`` (all ``cache_source``) over
  ``prompt_tokens_total``, set only when the build has ``cached_tokens`` (the family with no
  sample yet counts as 0 hits). The ``cache_hit_rate`` gauge (overwritten per prefill batch)
  is only ``prefix_hit_rate_gauge``.
* preemptions ``num_retracted_requests_total`` | ``num_retractions`` (counter, or a histogram's
  ``_sum``); requests ``num_requests_total``; aborted ``num_aborted_requests_total``. A real
  server shows a labelled counter only after its first increment: where the scheduler's
  ``num_retracted_reqs`` gauge is exported, an absent retraction or abort counter is 0
* the engine's own FLOP/byte count (``--enable-metrics --enable-mfu-metrics``;
  ``srt/observability/metrics_collector.py``, 0.5.23: ``increment_estimated_perf``):
  ``estimated_flops_per_gpu_total``/``_read_bytes_``/``_write_bytes_`` -> ``est_flops``/
  ``est_read_bytes``/``est_write_bytes``. Each series appears on its first increment: absent
  with the flag off, and before the first forward pass with it on (then ``/server_info``'s
  ``enable_mfu_metrics`` makes them 0 and sets ``info["enable_mfu_metrics"] = "true"``, so
  they read as counting, not as off)
* ttft ``time_to_first_token_seconds``; itl ``inter_token_latency_seconds``; tpot
  ``request_time_per_output_token_seconds``, else the old ``time_per_output_token_seconds``;
  e2e ``e2e_request_latency_seconds``; queue ``queue_time_seconds``; prompt_len/gen_len
  ``prompt_tokens_histogram``/``generation_tokens_histogram``
* prefill: ``per_stage_req_latency_seconds{stage="prefill_forward"}`` (the time from a
  request's first forward entry to its prefill's end, vLLM's prefill time); its other stages
  are not read. No per-request decode/inference histograms, no iteration tokens.
* spec decode: SGLang has no draft/accept counters; its ``spec_accept_rate`` gauge (accepted /
  proposed drafts of the last batch) -> ``spec_accept_rate_gauge``, only while speculative
  decoding is on (``spec_num_steps`` or ``spec_num_draft_tokens`` > 0, or, in builds without
  them, ``spec_accept_length`` > 0): without it the gauge reads 0, which is "not reported"

Decision: the old ``sglang:time_per_output_token_seconds`` (v0.3-0.4) is mapped to ``tpot``, not
``itl``. It was observed with the request's running mean (time since first token / tokens so
far), i.e. per-request time-per-output-token semantics, not a single inter-token gap, so it is
not comparable with the newer ``inter_token_latency_seconds`` (its ``_count`` grows with the
number of streamed chunks: 7.4 M in the v0.4 docs sample for 7.6 M generated tokens).
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse.common import assemble, identity_version, parse_engine_text, put_value
from llmtop.parse.dynamo_worker import ROLE_FAMILIES, set_role
from llmtop.parse.exposition import Family
from llmtop.parse.kv_series import SGLANG_FAMILIES, read_sglang
from llmtop.parse.vllm import Key, group_hists, group_values

__all__ = ["HIST_FAMILIES", "MFU_ON_INFO", "WANTED", "hist_key", "normalize",
           "normalize_families", "want"]

MFU_ON_INFO = "enable_mfu_metrics"
"""``ModelSample.info`` key, ``"true"`` when ``/server_info`` says the server counts its FLOPs
and bytes: its counters count from 0 even before their series appear
(``history.derive.est_counting``)."""

_P = "sglang:"
_GAUGES = {
    "num_running_reqs": ("running", "sum"),
    "num_queue_reqs": ("waiting", "sum"),
    "token_usage": ("kv_usage", "max"),
    "max_total_num_tokens": ("kv_capacity_tokens", "max"),
    "max_running_requests": ("max_running", "max"),
    "cache_hit_rate": ("prefix_hit_rate_gauge", "max"),
}
_COUNTERS = {
    "prompt_tokens": "prompt_tokens",
    "generation_tokens": "generation_tokens",
    "num_requests": "requests",
    "num_aborted_requests": "aborted",
}
_ESTIMATED = {
    "estimated_flops_per_gpu": "est_flops",
    "estimated_read_bytes_per_gpu": "est_read_bytes",
    "estimated_write_bytes_per_gpu": "est_write_bytes",
}
_PREEMPT = ("num_retracted_requests", "num_retractions")
_RETRACTED_NOW = "num_retracted_reqs"
_REALTIME = "realtime_tokens"
_STAGES = "per_stage_req_latency_seconds"
_SPEC_ON = ("spec_num_steps", "spec_num_draft_tokens")
_SPEC = ("spec_accept_rate", "spec_accept_length", *_SPEC_ON)
_HISTS: dict[str, tuple[str, ...]] = {
    "ttft": ("time_to_first_token_seconds",),
    "itl": ("inter_token_latency_seconds",),
    "tpot": ("request_time_per_output_token_seconds", "time_per_output_token_seconds"),
    "e2e": ("e2e_request_latency_seconds",),
    "queue": ("queue_time_seconds",),
    "prompt_len": ("prompt_tokens_histogram",),
    "gen_len": ("generation_tokens_histogram",),
}
WANTED = frozenset(
    _P + n
    for n in (
        *_GAUGES,
        *_COUNTERS,
        *_ESTIMATED,
        *_PREEMPT,
        _RETRACTED_NOW,
        _REALTIME,
        "cached_tokens",
        *_SPEC,
        _STAGES,
        *(n for names in _HISTS.values() for n in names),
    )
) | SGLANG_FAMILIES | ROLE_FAMILIES
"""Family names this adapter reads."""

want = WANTED.__contains__
_MODEL_LABELS = ("model_name", "name")
_ZERO_ONLY = ("tp_rank", "pp_rank", "moe_ep_rank")


def _key(labels: dict[str, str]) -> Key | None:
    for z in _ZERO_ONLY:
        if z in labels and labels[z] != "0":
            return None
    m = labels.get("model_name")  # _MODEL_LABELS, first present (a fleet reads it per series)
    if m is None:
        m = labels.get("name")
        if m is None:
            return None
    return m, labels.get("dp_rank")


hist_key = _key
"""The (model, rank) of a series, as ``normalize_families`` groups it."""
HIST_FAMILIES: dict[str, tuple[str, ...]] = {
    k: tuple(_P + n for n in names) for k, names in _HISTS.items()}
"""Histogram key -> family names, first present wins (``prefill`` comes from the per-stage
histogram's ``stage`` label, which fleet mode does not keep)."""


def _prefill_key(labels: dict[str, str]) -> Key | None:
    """``_key`` of the ``prefill_forward`` stage's series only."""
    return _key(labels) if labels.get("stage") == "prefill_forward" else None


def _first(families: dict[str, Family], names: tuple[str, ...]) -> Family | None:
    for n in names:
        fam = families.get(_P + n)
        if fam is not None and fam.samples:
            return fam
    return None


def normalize_families(families: dict[str, Family]) -> EngineSample:
    """Normalize parsed ``sglang:*`` families."""
    parts: dict[Key, ModelSample] = {}

    def put(kind: str, name: str, vals: dict[Key, Any], label: str | None = None) -> None:
        for k, v in vals.items():
            p = parts.get(k)
            if p is None:
                p = parts[k] = ModelSample(model=k[0], rank=k[1])
            put_value(p, kind, name, v, label)

    for fam_name, (gkey, agg) in _GAUGES.items():
        put("gauges", gkey, group_values(families.get(_P + fam_name), _key, suffix="", agg=agg))
    for fam_name, ckey in _COUNTERS.items():
        put("counters", ckey, group_values(families.get(_P + fam_name), _key))
    _estimated(families, put)
    realtime = families.get(_P + _REALTIME)
    if realtime is not None and realtime.samples:
        decode = _modes(realtime, ("decode",))
        finished = group_values(families.get(_P + "num_requests"), _key)
        put("counters", "generation_tokens", {k: v + finished.get(k, 0.0)
                                              for k, v in decode.items()})
        prompt = _modes(realtime, ("prefill_compute", "prefill_cache"))
        put("counters", "prompt_tokens", prompt)
        put("counters", "prefix_queries", prompt)
        put("counters", "prefix_hits", _modes(realtime, ("prefill_cache",)))
    now = group_values(families.get(_P + _RETRACTED_NOW), _key, suffix="", agg="max")
    pre = _first(families, _PREEMPT)
    if pre is not None:
        sfx = "_sum" if pre.type in ("histogram", "summary") else "_total"
        put("counters", "preemptions", group_values(pre, _key, suffix=sfx))
    else:
        put("counters", "preemptions", dict.fromkeys(now, 0.0))
    aborted = families.get(_P + "num_aborted_requests")
    if aborted is None or not aborted.samples:
        put("counters", "aborted", dict.fromkeys(now, 0.0))
    cached = families.get(_P + "cached_tokens")
    if cached is not None and (realtime is None or not realtime.samples):
        hits = group_values(cached, _key)
        queries = group_values(families.get(_P + "prompt_tokens"), _key)
        put("counters", "prefix_queries", queries)
        put("counters", "prefix_hits", {k: hits.get(k, 0.0) for k in queries} | hits)
    for hkey, names in _HISTS.items():
        put("hists", hkey, group_hists(_first(families, names), _key))
    put("hists", "prefill", group_hists(families.get(_P + _STAGES), _prefill_key))
    put("gauges", "spec_accept_rate_gauge", _spec_rate(families))
    read_sglang(families, _key, put, group_values, group_hists)
    set_role(families, parts)  # a Dynamo worker passing SGLang's series through

    return assemble("sglang", parts)


def _estimated(families: dict[str, Family], put: Any) -> None:
    """The FLOP/byte counters; each series appears on its first increment, so in a group
    that has one of the three, an absent one is 0."""
    vals = {ckey: group_values(families.get(_P + n), _key) for n, ckey in _ESTIMATED.items()}
    seen = {k for v in vals.values() for k in v}
    for ckey, v in vals.items():
        put("counters", ckey, dict.fromkeys(seen, 0.0) | v)


def _modes(fam: Family, modes: tuple[str, ...]) -> dict[Key, float]:
    """Σ of the ``mode`` series in ``modes`` per group; a group that has some
    series of the family but none of these modes yet counts 0 (series appear on first use)."""
    out = dict.fromkeys(group_values(fam, _key), 0.0)

    def key(labels: dict[str, str]) -> Key | None:
        return _key(labels) if labels.get("mode") in modes else None

    return out | group_values(fam, key)


def _spec_rate(families: dict[str, Family]) -> dict[Key, float]:
    """The ``spec_accept_rate`` gauge of the groups where speculative decoding is on."""
    rate = group_values(families.get(_P + "spec_accept_rate"), _key, suffix="", agg="max")
    if not rate:
        return {}
    on: dict[Key, float] = {}
    names = [n for n in _SPEC_ON if families.get(_P + n) is not None] or ["spec_accept_length"]
    for n in names:
        for k, v in group_values(families.get(_P + n), _key, suffix="", agg="max").items():
            on[k] = max(on.get(k, v), v)
    return {k: v for k, v in rate.items() if on.get(k, 0.0) > 0}


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """Parse and normalize one SGLang scrape. Raises ``ParseError`` on a bad payload."""
    families = parse_engine_text(body, "sglang:", want,
                                 "not SGLang, or started without --enable-metrics")
    sample = normalize_families(families)
    sample.version = identity_version(identity)
    limit = _identity_max_running(identity)
    if limit is not None:
        for m in sample.models:
            m.gauges.setdefault("max_running", limit)
    if _identity_mfu_on(identity):  # on, but maybe nothing counted yet: 0, not "off"
        for m in (*sample.models, *sample.ranks):
            for ckey in _ESTIMATED.values():
                m.counters.setdefault(ckey, 0.0)
            m.info[MFU_ON_INFO] = "true"  # what tells these 0s from vLLM's 0s with the flag off
    return sample


def _identity_mfu_on(identity: dict[str, Any] | None) -> bool:
    """``/server_info`` says the server counts FLOPs and bytes (``enable_mfu_metrics``)."""
    info = (identity or {}).get("sglang")
    return isinstance(info, dict) and info.get("enable_mfu_metrics") is True


def _identity_max_running(identity: dict[str, Any] | None) -> float | None:
    """``max_running_requests`` from ``/server_info`` (``identity["sglang"]``), when the
    server runs one scheduler (``dp_size`` absent or 1) and the value is a positive number."""
    info = (identity or {}).get("sglang")
    if not isinstance(info, dict):
        return None
    v, dp = info.get("max_running_requests"), info.get("dp_size", 1)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or dp not in (1, None):
        return None
    return float(v)
