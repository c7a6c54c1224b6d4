"""Triton Inference Server + TensorRT-LLM backend ``/metrics`` for a simulated engine.

Triton renders with prometheus-cpp: no ``_created`` samples, counters keep their bare names
(``nv_inference_request_success``, no ``_total``), labels sorted by name, numbers in the
shortest form (``512``, ``0.4875``, ``1e+06``). Families and label sets follow
``tests/fixtures/metrics/triton-trtllm_backend-readme.txt`` (the ``nv_trt_llm_*`` inflight
batcher block and the base ``nv_inference_*`` block, one model ``tensorrt_llm`` version
``1``); the ``nv_gpu_*``/``nv_energy_consumption`` HELP texts are Triton's, as quoted in
``triton-inference-server/model_analyzer`` tests. Left out (documented): the opt-in
``nv_inference_first_response_histogram_ms`` and summaries, ``nv_cpu_*``, the ``reason``
label of newer failures, and ``kv_cache_block_type="reused"``.
"""

from __future__ import annotations

import math
import time
from typing import Protocol

__all__ = ["CONTENT_TYPE", "HIST_BOUNDS", "format_value", "render"]

CONTENT_TYPE = "text/plain; charset=utf-8"
HIST_BOUNDS: dict[str, tuple[float, ...]] = {}


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
        ({**model, "general_type": "timestamp"}, int(time.time())),
    ])
    family("nv_trt_llm_disaggregated_serving_metrics", "TRT LLM disaggregated serving metrics",
           "counter", [
               ({**model, "disaggregated_serving_type": "kv_cache_transfer_ms"}, 0),
               ({**model, "disaggregated_serving_type": "request_count"}, 0),
           ])
    ok = c["success"]
    failed = c["rejected"] + c["aborted"]
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
