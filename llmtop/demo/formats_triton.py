"""Triton Inference Server + TensorRT-LLM backend ``/metrics`` for a simulated engine.

Triton renders with prometheus-cpp: no ``_created`` samples, counters keep their bare names
(``nv_inference_request_success``, no ``_total``), labels sorted by name, numbers in the
shortest form (``512``, ``0.4875``, ``1e+06``). Families and label sets follow
``tests/fixtures/metrics/triton-trtllm_backend-readme.txt`` (the ``nv_trt_llm_*`` inflight
batcher block and the base ``nv_inference_*`` block, one model ``tensorrt_llm`` version
``1``); the ``nv_gpu_*``/``nv_energy_consumption`` HELP texts are Triton's, as quoted in
``triton-inference-server/model_analyzer`` tests.

As a current TRT-LLM backend started with ``--metrics-config histogram_latencies=true``, it
also has the per-request histograms (references: ``triton-trtllm_backend-SYNTHETIC-from-
custom_metrics_reporter-cc.txt``, ``triton-SYNTHETIC-from-core-metrics-cc.txt``):

* ``nv_llm_input_token_len`` / ``nv_llm_output_token_len`` (HELP "TRT LLM response metrics",
  buckets 10, 50, 100, 500, 1000, label ``response_metric_type``): prompt tokens of each
  request (observed when its prefill completes), output tokens of each finished request.
* ``nv_inference_first_response_histogram_ms`` (buckets 100, 500, 2000, 5000 ms; the model is
  decoupled): time to the first response, which is the first token of a streaming request
  and the whole (single) response of a non-streaming one. Triton observes whole
  milliseconds; the demo buckets the exact time and floors the sum.

Left out (documented): the summaries, ``nv_cpu_*``, the ``reason`` label of newer failures,
``nv_model_load_duration_secs``, ``paused_requests`` and ``kv_cache_block_type="reused"``.
"""

from __future__ import annotations

import math
from typing import Protocol

from llmtop import clock

__all__ = [
    "CONTENT_TYPE", "FIRST_RESPONSE_BUCKETS_MS", "HIST_BOUNDS", "SPLIT", "TOKEN_BUCKETS",
    "format_value", "render",
]

CONTENT_TYPE = "text/plain; charset=utf-8"
# TRT-LLM backend token histograms (custom_metrics_reporter.cc).
TOKEN_BUCKETS = (10.0, 50.0, 100.0, 500.0, 1000.0)
# Triton core default for nv_inference_first_response_histogram_ms (metric_model_reporter.h).
FIRST_RESPONSE_BUCKETS_MS = (100.0, 500.0, 2000.0, 5000.0)
_FIRST_S = tuple(b / 1000.0 for b in FIRST_RESPONSE_BUCKETS_MS)
# Simulation histograms this engine keeps (sim.Stats drops the others). ttft/e2e are split by
# streaming: the first response of a non-streaming request is its only (final) response.
HIST_BOUNDS: dict[str, tuple[float, ...]] = {
    "prompt_len": TOKEN_BUCKETS,
    "gen_len": TOKEN_BUCKETS,
    "ttft": _FIRST_S,
    "e2e": _FIRST_S,
}
SPLIT = frozenset({"ttft", "e2e"})


class _Gpu(Protocol):
    uuid: str
    util: float
    mem_total_bytes: int
    mem_used_bytes: int
    power_w: float
    power_limit_w: float
    energy_j: float


def format_value(v: float) -> str:
    """A number as prometheus-cpp writes it (``std::to_chars`` shortest form)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "0"
    if v == int(v) and abs(v) < 1e17:
        fixed = str(int(v))
        mant = fixed.rstrip("0").lstrip("-")
        exp = len(fixed.lstrip("-")) - 1
        sci = f"{'-' if v < 0 else ''}{mant[0]}{'.' + mant[1:] if len(mant) > 1 else ''}e+{exp:02d}"
        return sci if len(sci) < len(fixed) else fixed
    r = repr(float(v))
    if "e" in r:
        mant, exp = r.split("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{abs(int(exp)):02d}"
    return r


def _labels(d: dict[str, str]) -> str:
    return ",".join(f'{k}="{d[k]}"' for k in sorted(d))


def render(engine: object, gpu: _Gpu | None = None) -> bytes:
    """The engine's ``/metrics`` body, as Triton 2.x with the TRT-LLM backend renders it."""
    from llmtop.demo.sim import Engine

    assert isinstance(engine, Engine)
    e = engine
    c = e.stats.c
    model = {"model": e.model, "version": "1"}
    out: list[str] = []

    def family(name: str, doc: str, typ: str, series: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {typ}\n")
        for labels, v in series:
            out.append(f"{name}{{{_labels(labels)}}} {format_value(v)}\n")

    def histogram(name: str, doc: str, labels: dict[str, str], les: tuple[float, ...],
                  cumulative: list[float], total: float) -> None:
        """prometheus-cpp order: _count, _sum, then the buckets (``le`` last, then +Inf).

        ``cumulative`` has one count per bound plus the +Inf one (``sim.Hist.cumulative``).
        """
        n = cumulative[-1] if cumulative else 0.0
        lab = _labels(labels)
        out.append(f"# HELP {name} {doc}\n# TYPE {name} histogram\n")
        out.append(f"{name}_count{{{lab}}} {format_value(n)}\n")
        out.append(f"{name}_sum{{{lab}}} {format_value(total)}\n")
        for le, cum in zip(les, cumulative[:-1], strict=True):
            out.append(f'{name}_bucket{{{lab},le="{format_value(le)}"}} {format_value(cum)}\n')
        out.append(f'{name}_bucket{{{lab},le="+Inf"}} {format_value(n)}\n')

    prefilling = sum(1 for r in e.running if r.computed < r.prefill_target)
    family("nv_trt_llm_request_metrics", "TRT LLM request metrics", "gauge", [
        ({**model, "request_type": "waiting"}, len(e.waiting)),
        ({**model, "request_type": "context"}, prefilling),
        ({**model, "request_type": "scheduled"}, len(e.running)),
        ({**model, "request_type": "max"}, e.settings.max_num_seqs),
        ({**model, "request_type": "active"}, len(e.running)),
    ])
    family("nv_trt_llm_runtime_memory_metrics", "TRT LLM runtime memory metrics", "gauge", [
        ({**model, "memory_type": "pinned"}, 0),
        ({**model, "memory_type": "gpu"}, e.profile.activation_bytes),
        ({**model, "memory_type": "cpu"}, 0),
    ])
    pool = e.pool
    family("nv_trt_llm_kv_cache_block_metrics", "TRT LLM KV cache block metrics", "gauge", [
        ({**model, "kv_cache_block_type": "fraction"}, round(pool.used / pool.total, 6)),
        ({**model, "kv_cache_block_type": "tokens_per"}, e.settings.block_size),
        ({**model, "kv_cache_block_type": "used"}, pool.used),
        ({**model, "kv_cache_block_type": "free"}, pool.total - pool.used),
        ({**model, "kv_cache_block_type": "max"}, pool.total),
    ])
    family("nv_trt_llm_inflight_batcher_metrics", "TRT LLM inflight_batcher-specific metrics",
           "gauge", [
               ({**model, "inflight_batcher_specific_metric": "micro_batch_id"}, 0),
               ({**model, "inflight_batcher_specific_metric": "generation_requests"},
                len(e.running) - prefilling),
               ({**model, "inflight_batcher_specific_metric": "total_context_tokens"},
                max(0, e.last_step_tokens - (len(e.running) - prefilling))),
           ])
    family("nv_trt_llm_general_metrics", "General TRT LLM metrics", "gauge", [
        ({**model, "general_type": "iteration_counter"}, e.steps),
        ({**model, "general_type": "timestamp"}, int(clock.time() * 1e6)),  # µs (current backend)
    ])
    family("nv_trt_llm_disaggregated_serving_metrics", "TRT LLM disaggregated serving metrics",
           "counter", [
               ({**model, "disaggregated_serving_type": "kv_cache_transfer_ms"}, 0),
               ({**model, "disaggregated_serving_type": "request_count"}, 0),
           ])
    for name, key, rtype in (("nv_llm_output_token_len", "gen_len", "total_output_tokens"),
                             ("nv_llm_input_token_len", "prompt_len", "total_input_tokens")):
        h = e.stats.hist(key)
        histogram(name, "TRT LLM response metrics", {**model, "response_metric_type": rtype},
                  TOKEN_BUCKETS, h.cumulative(), h.sum)
    ok = c["success"]
    failed = c["rejected"] + c["aborted"] + c["errors"]
    for name, doc, typ, v in (
        ("nv_inference_request_success",
         "Number of successful inference requests, all batch sizes", "counter", ok),
        ("nv_inference_request_failure",
         "Number of failed inference requests, all batch sizes", "counter", failed),
        ("nv_inference_count",
         "Number of inferences performed (does not include cached requests)", "counter", ok),
        ("nv_inference_exec_count",
         "Number of model executions performed (does not include cached requests)", "counter",
         ok),
        ("nv_inference_request_duration_us",
         "Cumulative inference request duration in microseconds (includes cached requests)",
         "counter", int(c["e2e_us"])),
        ("nv_inference_queue_duration_us",
         "Cumulative inference queuing duration in microseconds (includes cached requests)",
         "counter", int(c["queue_us"])),
        ("nv_inference_compute_input_duration_us",
         "Cumulative compute input duration in microseconds (does not include cached requests)",
         "counter", int(ok * 45)),
        ("nv_inference_compute_infer_duration_us",
         "Cumulative compute inference duration in microseconds (does not include cached "
         "requests)", "counter", int(c["compute_us"])),
        ("nv_inference_compute_output_duration_us",
         "Cumulative inference compute output duration in microseconds (does not include "
         "cached requests)", "counter", int(ok * 30)),
        ("nv_inference_pending_request_count",
         "Instantaneous number of pending requests awaiting execution per-model.", "gauge",
         0),  # decoupled TRT-LLM model: Triton hands requests to the backend at once
    ):
        family(name, doc, typ, [(model, v)])
    # first response: streaming requests at their first token, non-streaming at their end
    first, slow = e.stats.hist("ttft:true"), e.stats.hist("e2e:false")
    cum = [a + b for a, b in zip(first.cumulative(), slow.cumulative(), strict=True)]
    histogram("nv_inference_first_response_histogram_ms",
              "Duration from request to first response in milliseconds", model,
              FIRST_RESPONSE_BUCKETS_MS, cum, math.floor((first.sum + slow.sum) * 1000.0))
    if gpu is not None:
        g = {"gpu_uuid": gpu.uuid}
        family("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", "gauge",
               [(g, round(gpu.util, 2))])
        family("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", "gauge",
               [(g, gpu.mem_total_bytes)])
        family("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", "gauge",
               [(g, gpu.mem_used_bytes)])
        family("nv_gpu_power_usage", "GPU power usage in watts", "gauge",
               [(g, round(gpu.power_w, 3))])
        family("nv_gpu_power_limit", "GPU power management limit in watts", "gauge",
               [(g, gpu.power_limit_w)])
        family("nv_energy_consumption",
               "GPU energy consumption in joules since the Triton Server started", "counter",
               [(g, round(gpu.energy_j, 3))])
    return "".join(out).encode()
