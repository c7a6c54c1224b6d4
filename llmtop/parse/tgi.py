"""Hugging Face TGI ``/metrics`` (``tgi_*``, METRICS.md §8) -> ``EngineSample``.

Rendered by rust ``metrics-exporter-prometheus``: counters have no ``_total`` and any
histogram without configured buckets comes out as a summary, read here as a mean-only
``Hist``. No model label (one model per process): the model is ``identity["model_id"]``
(``/info``) or "default".

running ``tgi_batch_current_size``; waiting ``tgi_queue_size``; kv_capacity_tokens
``tgi_batch_max_total_tokens``; kv_usage is a proxy: ``tgi_batch_current_max_tokens`` /
``tgi_batch_max_total_tokens`` (tokens the current batch may reach). ``requests`` = success +
failure (``finished`` ``success``/``error``); failures by ``err`` label go to
``errors``/``error`` by err, ``rejected`` = ``err="overloaded"``. Histograms: e2e
``tgi_request_duration``, queue ``tgi_request_queue_duration``, tpot
``tgi_request_mean_time_per_token_duration``, itl ``tgi_batch_forward_duration{method=
"decode"}`` (one decode step of the batch), prompt_len/gen_len from the request length
histograms, whose ``_sum`` also give the token counters (finished requests only). TGI has no
TTFT, prefix-cache or preemption metrics: absent.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse import common
from llmtop.parse.common import (
    hist_family,
    identity_model,
    identity_version,
    is_finite,
    outcome_counters,
    sample_index,
)
from llmtop.parse.exposition import ParseError, Sample, parse

__all__ = ["normalize"]

_HISTS = {
    "tgi_request_duration": ("e2e", None),
    "tgi_request_queue_duration": ("queue", None),
    "tgi_request_mean_time_per_token_duration": ("tpot", None),
    "tgi_batch_forward_duration": ("itl", {"method": "decode"}),
    "tgi_request_input_length": ("prompt_len", None),
    "tgi_request_generated_tokens": ("gen_len", None),
}


def _value(idx: dict[str, list[Sample]], name: str) -> float | None:
    vals = [s.value for s in idx.get(name, ()) if is_finite(s.value)]
    return sum(vals) if vals else None


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """TGI ``/metrics`` text -> ``EngineSample(engine="tgi")``."""
    fams = parse(body, want=lambda n: n.startswith("tgi_"))
    idx = sample_index(fams)
    if not fams:
        raise ParseError("no tgi_* series")
    m = ModelSample(model=identity_model(identity))
    for name, key in (("tgi_batch_current_size", "running"), ("tgi_queue_size", "waiting")):
        v = _value(idx, name)
        if v is not None:
            m.gauges[key] = v
    cur = _value(idx, "tgi_batch_current_max_tokens")
    cap = _value(idx, "tgi_batch_max_total_tokens")
    if cap is not None:
        m.gauges["kv_capacity_tokens"] = cap
        if cur is not None and cap > 0:
            m.gauges["kv_usage"] = cur / cap
    ident = identity or {}
    mbs = ident.get("max_batch_size")
    if isinstance(mbs, (int, float)) and not isinstance(mbs, bool) and mbs > 0:
        m.gauges["max_running"] = float(mbs)
    _requests(idx, m)
    for base, (key, where) in _HISTS.items():
        hists = common.build_hists(hist_family(idx, base), (), where=where)
        h = hists.get(())
        if h is not None:
            m.hists[key] = h
    for key, hkey in (("prompt_tokens", "prompt_len"), ("generation_tokens", "gen_len")):
        if hkey in m.hists:
            m.counters[key] = m.hists[hkey].sum
    for k in ("max_concurrent_requests", "max_input_tokens", "max_total_tokens", "model_sha"):
        v = ident.get(k)
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            m.info[k] = str(v)
    extra: dict[str, Any] = {}
    received = _value(idx, "tgi_request_count")
    if received is not None:
        extra["requests_received"] = received
    prefill = common.build_hists(
        hist_family(idx, "tgi_batch_inference_duration"), (), where={"method": "prefill"}
    ).get(())
    if prefill is not None:
        extra["prefill_batch_s"] = {"sum": prefill.sum, "count": prefill.count}
    return EngineSample(
        engine="tgi", version=identity_version(identity), models=[m], extra=extra
    )


def _requests(idx: dict[str, list[Sample]], m: ModelSample) -> None:
    ok = _value(idx, "tgi_request_success")
    fails: dict[str, float] = {}
    for s in idx.get("tgi_request_failure", ()):
        if is_finite(s.value):
            err = s.labels.get("err", "")
            fails[err] = fails.get(err, 0.0) + s.value
    if ok is None and not fails:
        return
    outcome_counters(m, ok, fails or None, rejected="overloaded")
