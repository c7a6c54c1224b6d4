"""LMDeploy ``/metrics`` (``lmdeploy serve api_server``, port 23333) -> ``EngineSample``.

``docs/metrics.md`` ("LMDeploy") and ``InternLM/lmdeploy lmdeploy/metrics/loggers.py``: vLLM-like
names under ``lmdeploy:``, labels ``model_name`` and ``engine`` (the DP rank; DP > 1 usually
means one API server per rank, so one rank per scrape). No ``_created`` series
(``disable_created_metrics``) and no ``process_*`` start time.

* running ``num_requests_running``; waiting ``num_requests_waiting``; kv_usage
  ``gpu_cache_usage_perc`` (0..1); ``prefix_cache_hit_rate`` (a gauge) -> ``prefix_hit_rate_gauge``
* prompt/generation tokens ``prompt_tokens_total``/``generation_tokens_total``; when the build
  has ``cached_tokens_total``: prefix_hits = cached tokens, prefix_queries = prompt tokens
* ``request_success_total{finished_reason}``: the reason is ``str(ResponseType.X)``
  (``ResponseType.FINISH``...), normalized to lower case without the class name
  (``finish``, ``cancel``... of the ``finished`` counters); ``requests`` = all, ``aborted``
  = ``cancel`` (or ``abort``), ``errors`` = reasons containing ``error``
* ttft ``time_to_first_token_seconds``; itl ``iter_token_latency``; tpot
  ``time_per_output_token_seconds`` (per request); e2e ``e2e_request_latency_seconds``; queue
  ``request_queue_time_seconds``; prefill/decode/inference ``request_{prefill,decode,
  inference}_time_seconds``; prompt_len/gen_len ``request_prompt_tokens``/
  ``request_generation_tokens``; iteration_tokens ``iteration_tokens_total`` (a histogram)
* spec decode ``spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total`` ->
  ``spec_drafts``/``spec_draft_tokens``/``spec_accepted_tokens``; the gauge
  ``spec_decode_mean_accept_rate`` -> ``spec_accept_rate_gauge``
* ``backend_config_info`` labels -> ``ModelSample.info``
"""

from __future__ import annotations

import math
from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse.common import add_value, assemble, identity_version, parse_engine_text
from llmtop.parse.exposition import Family
from llmtop.parse.vllm import Key, group_hists, group_values

__all__ = ["HIST_FAMILIES", "WANTED", "hist_key", "normalize", "normalize_families", "want"]

_P = "lmdeploy:"
_GAUGES = {
    "num_requests_running": ("running", "sum"),
    "num_requests_waiting": ("waiting", "sum"),
    "gpu_cache_usage_perc": ("kv_usage", "max"),
    "prefix_cache_hit_rate": ("prefix_hit_rate_gauge", "max"),
    "spec_decode_mean_accept_rate": ("spec_accept_rate_gauge", "max"),
}
_COUNTERS = {
    "prompt_tokens": "prompt_tokens",
    "generation_tokens": "generation_tokens",
    "spec_decode_num_drafts": "spec_drafts",
    "spec_decode_num_draft_tokens": "spec_draft_tokens",
    "spec_decode_num_accepted_tokens": "spec_accepted_tokens",
}
_HISTS = {
    "ttft": "time_to_first_token_seconds",
    "itl": "iter_token_latency",
    "tpot": "time_per_output_token_seconds",
    "e2e": "e2e_request_latency_seconds",
    "queue": "request_queue_time_seconds",
    "prefill": "request_prefill_time_seconds",
    "decode": "request_decode_time_seconds",
    "inference": "request_inference_time_seconds",
    "prompt_len": "request_prompt_tokens",
    "gen_len": "request_generation_tokens",
    "iteration_tokens": "iteration_tokens_total",  # a histogram family named ..._total
}
WANTED = frozenset(
    _P + n
    for n in (
        *_GAUGES,
        *_COUNTERS,
        *_HISTS.values(),
        "cached_tokens",
        "request_success",
        "backend_config_info",
    )
)
"""Family names this adapter reads."""

want = WANTED.__contains__


def _key(labels: dict[str, str]) -> Key | None:
    m = labels.get("model_name")
    return None if m is None else (m, labels.get("engine"))


hist_key = _key
"""The (model, rank) of a series, as ``normalize_families`` groups it."""
HIST_FAMILIES: dict[str, tuple[str, ...]] = {k: (_P + n,) for k, n in _HISTS.items()}
"""Histogram key -> its family name (fleet mode queries these buckets only)."""


def _reason(raw: str) -> str:
    return raw.rsplit(".", 1)[-1].lower() if raw.startswith("ResponseType.") else raw.lower()


def normalize_families(families: dict[str, Family]) -> EngineSample:
    """Normalize parsed ``lmdeploy:*`` families."""
    parts: dict[Key, ModelSample] = {}

    def part(k: Key) -> ModelSample:
        p = parts.get(k)
        if p is None:
            p = parts[k] = ModelSample(model=k[0], rank=k[1])
        return p

    def put(kind: str, name: str, vals: dict[Key, Any]) -> None:
        for k, v in vals.items():
            getattr(part(k), kind)[name] = v

    for fam_name, (gkey, agg) in _GAUGES.items():
        put("gauges", gkey, group_values(families.get(_P + fam_name), _key, suffix="", agg=agg))
    for fam_name, ckey in _COUNTERS.items():
        put("counters", ckey, group_values(families.get(_P + fam_name), _key))
    cached = families.get(_P + "cached_tokens")
    if cached is not None:
        hits = group_values(cached, _key)
        queries = group_values(families.get(_P + "prompt_tokens"), _key)
        put("counters", "prefix_queries", queries)
        put("counters", "prefix_hits", {k: hits.get(k, 0.0) for k in queries} | hits)
    succ = families.get(_P + "request_success")
    if succ is not None:
        for s in succ.samples:
            if s.name != succ.name + "_total" or not math.isfinite(s.value):
                continue
            k = _key(s.labels)
            if k is None:
                continue
            m = part(k)
            c = m.counters
            reason = _reason(s.labels.get("finished_reason", "unknown"))
            add_value(m, "counters", "finished", s.value, reason)
            c["requests"] = c.get("requests", 0.0) + s.value
            if reason in ("cancel", "abort"):
                c["aborted"] = c.get("aborted", 0.0) + s.value
            elif "error" in reason:
                c["errors"] = c.get("errors", 0.0) + s.value
    for hkey, fam_name in _HISTS.items():
        put("hists", hkey, group_hists(families.get(_P + fam_name), _key))
    info = families.get(_P + "backend_config_info")
    if info is not None:
        for s in info.samples:
            for p in parts.values():
                for k, v in s.labels.items():
                    p.info.setdefault(k, v)

    return assemble("lmdeploy", parts)


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """Parse and normalize one LMDeploy scrape. Raises ``ParseError`` on a bad payload."""
    families = parse_engine_text(body, "lmdeploy:", want,
                                 "not LMDeploy, or its metrics are disabled")
    sample = normalize_families(families)
    sample.version = identity_version(identity)
    return sample
