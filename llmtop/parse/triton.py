"""NVIDIA Triton Inference Server ``/metrics`` (port 8002) -> ``EngineSample`` (METRICS.md §6).

One ``ModelSample`` per ``model`` label (versions summed; ``info["version"]`` lists them).

* Core ``nv_inference_*``: cumulative counters, latencies in cumulative **microseconds**.
  Mean-only latencies become ``Hist(bounds=(), cumulative=(), sum=seconds, count=requests)``:
  ``e2e`` from ``nv_inference_request_duration_us``, ``queue`` from
  ``nv_inference_queue_duration_us``, ``inference`` from the sum of the three
  ``nv_inference_compute_{input,infer,output}_duration_us``, all over ``success`` only: a real
  2.51 server adds nothing to them for a failed request. ``requests`` = success +
  failure, split as ``finished`` ``success``/``error``; failures go to ``errors`` and
  ``error`` by REASON (``rejected`` = REJECTED, ``aborted`` = CANCELED). TTFT from the opt-in
  ``nv_inference_first_response_histogram_ms`` (ms -> s). Compute times, execution counts,
  response-cache counters and the opt-in ``*_summary_us`` quantiles go to
  ``extra["triton_models"][model]`` (seconds).
* TensorRT-LLM backend ``nv_trt_llm_*``/``nv_llm_*`` (§6.2): running/max_running/waiting from
  ``request_type``, KV usage/capacity from ``kv_cache_block_type``, cumulative ``reused`` blocks
  as ``prefix_hits`` tokens (no misses exist, so no ``prefix_queries``), token counters and
  length histograms from ``nv_llm_{input,output}_token_len``.
* Triton vLLM backend (``vllm:*`` with ``model``/``version`` labels, §6.3), through
  ``vllm.normalize_families`` when present. Triton's own values win, except that a histogram
  with more buckets replaces a coarser or mean-only one (vLLM's e2e beats the µs counter).
* ``nv_gpu_*``/``nv_energy_consumption`` -> ``GpuRecord(source="triton")``, index in order of
  first appearance, host from ``identity["host"]``.

Triton has no process start metric: ``start_time`` stays None.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample, GpuRecord, Hist, ModelSample
from llmtop.parse import common
from llmtop.parse.common import (
    hist_family,
    identity_host,
    identity_version,
    outcome_counters,
    sample_index,
)
from llmtop.parse.exposition import ParseError, Sample, parse
from llmtop.parse.gpu_common import clean

__all__ = ["normalize"]

_US = 1e-6
_PREFIXES = ("nv_", "vllm:")

# Extra per-model cumulative values (name -> key in extra; *_us converted to seconds).
_EXTRA_COUNTERS = {
    "nv_inference_count": "inference_count",
    "nv_inference_exec_count": "exec_count",
    "nv_inference_compute_input_duration_us": "compute_input_s",
    "nv_inference_compute_infer_duration_us": "compute_infer_s",
    "nv_inference_compute_output_duration_us": "compute_output_s",
    "nv_cache_num_hits_per_model": "cache_hits",
    "nv_cache_num_misses_per_model": "cache_misses",
    "nv_cache_hit_duration_per_model": "cache_hit_s",
    "nv_cache_miss_duration_per_model": "cache_miss_s",
}
# Per-request compute time (input + infer + output): the ``inference`` phase, mean only.
_COMPUTE = (
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)
_SUMMARIES = {
    "nv_inference_request_summary_us": "e2e",
    "nv_inference_queue_summary_us": "queue",
    "nv_inference_compute_input_summary_us": "compute_input",
    "nv_inference_compute_infer_summary_us": "compute_infer",
    "nv_inference_compute_output_summary_us": "compute_output",
}
# Category families of the TensorRT-LLM backend: family -> category label.
_TRT_FAMILIES = {
    "nv_trt_llm_request_metrics": "request_type",
    "nv_trt_llm_runtime_memory_metrics": "memory_type",
    "nv_trt_llm_kv_cache_block_metrics": "kv_cache_block_type",
    "nv_trt_llm_inflight_batcher_metrics": "inflight_batcher_specific_metric",
    "nv_trt_llm_v1_metrics": "v1_specific_metric",
    "nv_trt_llm_general_metrics": "general_type",
    "nv_trt_llm_disaggregated_serving_metrics": "disaggregated_serving_type",
}
# Triton vLLM backend: vLLM histogram name -> HIST key.
_VLLM_HISTS = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:time_per_output_token_seconds": "itl",
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:request_time_per_output_token_seconds": "tpot",
    "vllm:e2e_request_latency_seconds": "e2e",
    "vllm:request_queue_time_seconds": "queue",
    "vllm:request_prompt_tokens": "prompt_len",
    "vllm:request_generation_tokens": "gen_len",
}
_GPU_FIELDS = {
    "nv_gpu_utilization": "util",
    "nv_gpu_memory_total_bytes": "mem_total_bytes",
    "nv_gpu_memory_used_bytes": "mem_used_bytes",
    "nv_gpu_power_usage": "power_w",
    "nv_gpu_power_limit": "power_limit_w",
    "nv_energy_consumption": "energy_j",
}


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """Triton ``/metrics`` text -> ``EngineSample(engine="triton")``."""
    fams = parse(body, want=lambda n: n.startswith(_PREFIXES))
    idx = sample_index(fams)
    if not fams:  # HELP/TYPE-only families (no model loaded yet) still say "Triton"
        raise ParseError("no nv_* or vllm:* series: not a Triton metrics payload")

    models: dict[str, ModelSample] = {}
    versions: dict[str, set[str]] = {}
    extra_models: dict[str, dict[str, Any]] = {}

    def ms(model: str) -> ModelSample:
        if model not in models:
            models[model] = ModelSample(model=model)
        return models[model]

    for samples in idx.values():
        for s in samples:
            m = s.labels.get("model")
            if m is not None:
                ms(m)
                v = s.labels.get("version")
                if v:
                    versions.setdefault(m, set()).add(v)

    _core(idx, ms, extra_models)
    _trt_llm(idx, ms, extra_models)
    _vllm_backend(fams, idx, ms)

    for m, vs in versions.items():
        models[m].info["version"] = ",".join(sorted(vs, key=_version_key))
    extra: dict[str, Any] = {}
    if extra_models:
        extra["triton_models"] = extra_models
    cpu = _cpu(idx)
    if cpu:
        extra["cpu"] = cpu
    return EngineSample(
        engine="triton",
        version=identity_version(identity),
        models=[models[k] for k in sorted(models)],
        gpus=_gpus(idx, identity_host(identity)),
        extra=extra,
    )


def _version_key(v: str) -> tuple[int, str]:
    return (int(v), v) if v.isdigit() else (1 << 62, v)


def _by_model(idx: dict[str, list[Sample]], name: str) -> dict[str, float]:
    """Sum ``name`` samples by ``model`` label (NaN skipped)."""
    out: dict[str, float] = {}
    for s in idx.get(name, ()):
        m = s.labels.get("model")
        if m is not None and s.value == s.value:
            out[m] = out.get(m, 0.0) + s.value
    return out


def _by_model_label(
    idx: dict[str, list[Sample]], name: str, label: str
) -> dict[str, dict[str, float]]:
    """Sum ``name`` samples by model, then by ``label`` value ('' when absent)."""
    out: dict[str, dict[str, float]] = {}
    for s in idx.get(name, ()):
        m = s.labels.get("model")
        if m is None or s.value != s.value:
            continue
        d = out.setdefault(m, {})
        k = s.labels.get(label, "")
        d[k] = d.get(k, 0.0) + s.value
    return out


def _core(idx: dict[str, list[Sample]], ms: Any, extra_models: dict[str, dict[str, Any]]) -> None:
    success = _by_model(idx, "nv_inference_request_success")
    failure = _by_model_label(idx, "nv_inference_request_failure", "reason")
    duration = _by_model(idx, "nv_inference_request_duration_us")
    queue = _by_model(idx, "nv_inference_queue_duration_us")
    pending = _by_model(idx, "nv_inference_pending_request_count")
    for m in set(success) | set(failure):
        sample = ms(m)
        outcome_counters(sample, success.get(m), failure.get(m),
                         rejected="REJECTED", aborted="CANCELED")
    compute: dict[str, float] = {}
    for name in _COMPUTE:
        for m, us in _by_model(idx, name).items():
            compute[m] = compute.get(m, 0.0) + us
    # The duration counters count successful requests only (a failed request adds nothing to
    # them, seen on a real 2.51 server), so their mean is over ``success``, not all requests.
    for src, key in ((duration, "e2e"), (queue, "queue"), (compute, "inference")):
        for m, us in src.items():
            n = success.get(m)
            if n is not None:
                ms(m).hists[key] = Hist(bounds=(), cumulative=(), sum=us * _US, count=n)
    for m, v in pending.items():
        ms(m).gauges["waiting"] = v
    ttft_fam = hist_family(idx, "nv_inference_first_response_histogram_ms")
    for (m,), h in common.build_hists(ttft_fam, ("model",), scale=1e-3).items():
        if m:
            ms(m).hists["ttft"] = h
    for name, key in _EXTRA_COUNTERS.items():
        scale = _US if key.endswith("_s") else 1.0
        for m, v in _by_model(idx, name).items():
            extra_models.setdefault(m, {})[key] = v * scale
    for name, key in _SUMMARIES.items():
        for s in idx.get(name, ()):
            mname, q = s.labels.get("model"), s.labels.get("quantile")
            if mname is None or q is None or s.value != s.value:
                continue
            e = extra_models.setdefault(mname, {}).setdefault("quantiles_s", {})
            e.setdefault(key, {})[q] = s.value * _US


def _trt_llm(
    idx: dict[str, list[Sample]], ms: Any, extra_models: dict[str, dict[str, Any]]
) -> None:
    cats: dict[str, dict[str, dict[str, float]]] = {}  # family -> model -> category -> value
    for fam, label in _TRT_FAMILIES.items():
        for m, d in _by_model_label(idx, fam, label).items():
            cats.setdefault(fam, {})[m] = d
    for m, d in cats.get("nv_trt_llm_request_metrics", {}).items():
        sample = ms(m)
        if "active" in d:
            sample.gauges["running"] = d["active"]
        if "max" in d:
            sample.gauges["max_running"] = d["max"]
        if "waiting" in d:
            sample.gauges["waiting"] = sample.gauges.get("waiting", 0.0) + d["waiting"]
        rest = {k: v for k, v in d.items() if k in ("scheduled", "context")}
        if rest:
            extra_models.setdefault(m, {}).setdefault("trt_llm", {}).update(
                {f"requests_{k}": v for k, v in rest.items()}
            )
    for m, d in cats.get("nv_trt_llm_kv_cache_block_metrics", {}).items():
        sample = ms(m)
        mx, used, tpb = d.get("max"), d.get("used"), d.get("tokens_per")
        if "fraction" in d:
            sample.gauges["kv_usage"] = d["fraction"]
        elif mx and used is not None:
            sample.gauges["kv_usage"] = used / mx
        if mx is not None and tpb is not None:
            sample.gauges["kv_capacity_tokens"] = mx * tpb
        if "reused" in d and tpb is not None:
            sample.counters["prefix_hits"] = d["reused"] * tpb
        extra_models.setdefault(m, {}).setdefault("trt_llm", {}).update(
            {f"kv_blocks_{k}": v for k, v in d.items() if k in ("max", "free", "used", "reused")}
        )
    for fam, prefix in (
        ("nv_trt_llm_runtime_memory_metrics", "memory_bytes_"),
        ("nv_trt_llm_inflight_batcher_metrics", "ifb_"),
        ("nv_trt_llm_v1_metrics", "v1_"),
        ("nv_trt_llm_general_metrics", ""),
        ("nv_trt_llm_disaggregated_serving_metrics", "disagg_"),
    ):
        for m, d in cats.get(fam, {}).items():
            extra_models.setdefault(m, {}).setdefault("trt_llm", {}).update(
                {prefix + k: v for k, v in d.items() if k}
            )
    for name, counter, hkey in (
        ("nv_llm_input_token_len", "prompt_tokens", "prompt_len"),
        ("nv_llm_output_token_len", "generation_tokens", "gen_len"),
    ):
        for (m,), h in common.build_hists(hist_family(idx, name), ("model",)).items():
            if not m:
                continue
            sample = ms(m)
            if h.bounds:
                sample.hists[hkey] = h
            sample.counters[counter] = h.sum


def _vllm_backend(fams: dict[str, Any], idx: dict[str, list[Sample]], ms: Any) -> None:
    """vLLM names with Triton's ``model`` label (Triton vLLM backend)."""
    if not any(k.startswith("vllm:") for k in idx):
        return
    vllm_mod: Any = None
    try:
        from llmtop.parse import vllm as vllm_mod
    except ImportError:
        vllm_mod = None
    fn = getattr(vllm_mod, "normalize_families", None)
    if fn is not None:
        vfams = {k: f for k, f in fams.items() if k.startswith("vllm:")}
        got = fn(vfams, model_labels=("model_name", "model"))
        parts = got.models if isinstance(got, EngineSample) else list(got)
        for p in parts:
            _merge(ms(p.model), p)
        return
    for name, key in (("vllm:prompt_tokens", "prompt_tokens"),
                      ("vllm:generation_tokens", "generation_tokens")):
        for m, v in _by_model(idx, name).items():
            ms(m).counters[key] = v
    for base, key in _VLLM_HISTS.items():
        for (m,), h in common.build_hists(hist_family(idx, base), ("model",)).items():
            if m:
                _merge(ms(m), ModelSample(model=m, hists={key: h}))


def _merge(into: ModelSample, src: ModelSample) -> None:
    for k, v in src.gauges.items():
        into.gauges.setdefault(k, v)
    for k, v in src.counters.items():
        into.counters.setdefault(k, v)
    for k, h in src.hists.items():
        cur = into.hists.get(k)
        if cur is None or len(h.bounds) > len(cur.bounds):  # finer buckets win
            into.hists[k] = h
    for k, s in src.info.items():
        into.info.setdefault(k, s)


def _gpus(idx: dict[str, list[Sample]], host: str) -> list[GpuRecord]:
    """``nv_gpu_*`` by ``gpu_uuid``; index = order of first appearance in the payload."""
    values: dict[str, dict[str, float]] = {}
    for name, samples in idx.items():  # the index keeps payload order
        attr = _GPU_FIELDS.get(name)
        if attr is None:
            continue
        for s in samples:
            uuid = s.labels.get("gpu_uuid")
            if uuid is None:
                continue
            d = values.setdefault(uuid, {})
            v = clean(s.value)
            if v is not None:
                d[attr] = v
    out = []
    for i, (uuid, d) in enumerate(values.items()):
        rec = GpuRecord(host=host, index=i, source="triton", uuid=uuid)
        for attr, v in d.items():
            setattr(rec, attr, int(v) if attr.endswith("_bytes") else v)
        out.append(rec)
    return out


def _cpu(idx: dict[str, list[Sample]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, key in (
        ("nv_cpu_utilization", "util"),
        ("nv_cpu_memory_total_bytes", "mem_total_bytes"),
        ("nv_cpu_memory_used_bytes", "mem_used_bytes"),
        ("nv_pinned_memory_pool_total_bytes", "pinned_total_bytes"),
        ("nv_pinned_memory_pool_used_bytes", "pinned_used_bytes"),
    ):
        for s in idx.get(name, ()):
            v = clean(s.value)
            if v is not None:
                out[key] = v
                break
    return out
