"""Every series the exporter serves, listed once: name, type, labels and help.

``docs/exporter.md`` lists the same names and labels (``tests/export/test_names.py`` keeps
them equal). Engine series have the same name whatever the engine; what an engine does not
report is absent, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKEND_LABELS", "ENGINE_LABELS", "ENGINE_VALUES", "FINDING_LABELS", "GPU_LABELS",
           "QUANTILES", "QUANTILE_VALUES", "ROUTER_LABELS", "SERIES", "Series", "series"]

ENGINE_LABELS = ("target", "engine", "model", "role", "rank")
"""``role`` (prefill, decode, both) where the router, the engine or pod labels say it;
``rank`` is set on per-rank rows only (data-parallel engines); the model's own row, ranks
folded in, has none (an empty label is no label in Prometheus)."""
ROUTER_LABELS = ("target", "engine")
"""A router target and its family (``vllm-router``, ``sglang-router``...)."""
BACKEND_LABELS = (*ROUTER_LABELS, "backend", "backend_target", "role")
"""A router's backend: its worker URL as the router names it, the engine target llmtop
scrapes for it (when it does) and its role."""
FINDING_LABELS = ("target", "engine", "model", "rule", "severity")
GPU_LABELS = ("host", "gpu", "uuid", "name")

QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.95", "p95"), ("0.99", "p99"))
"""(``quantile`` label, ``Quantiles`` field)."""

ENGINE_VALUES = (
    # (series name, EngineRow field, help)
    ("llmtop_engine_running", "running", "Requests in the running batch."),
    ("llmtop_engine_waiting", "waiting", "Requests waiting in the queue."),
    ("llmtop_engine_waiting_deferred", "waiting_deferred",
     "Of the waiting requests, those deferred (vLLM: LoRA budget, KV transfer, blocked)."),
    ("llmtop_engine_max_running", "max_running",
     "Most requests the engine runs at once (max_num_seqs and kin)."),
    ("llmtop_engine_kv_usage_ratio", "kv_cache_usage", "KV cache in use, 0..1."),
    ("llmtop_engine_kv_capacity_tokens", "kv_capacity_tokens", "KV cache capacity in tokens."),
    ("llmtop_engine_prefix_hit_ratio", "prefix_hit_rate",
     "Prefix cache hits / queried tokens over the window, 0..1."),
    ("llmtop_engine_prompt_tokens_per_second", "prompt_tokens_per_s",
     "Prompt (prefill) tokens per second over the window."),
    ("llmtop_engine_generation_tokens_per_second", "generation_tokens_per_s",
     "Generated tokens per second over the window."),
    ("llmtop_engine_requests_per_second", "requests_per_s",
     "Finished requests per second over the window."),
    ("llmtop_engine_preemptions_per_second", "preemptions_per_s",
     "Preemptions (vLLM) or retractions (SGLang) per second over the window."),
    ("llmtop_engine_errors_per_second", "errors_per_s",
     "Failed requests per second over the window."),
    ("llmtop_engine_capacity_used_ratio", "capacity_used",
     "Requests per second over the window / the capacity profile's (absent without one)."),
    ("llmtop_engine_capacity_requests_per_second", "capacity_requests_per_s",
     "The capacity profile's requests per second within its SLOs (absent without one)."),
    ("llmtop_engine_achieved_flops_per_second", "achieved_flops_per_s",
     "The engine's own estimate of FLOP/s per GPU over the window (vLLM/SGLang "
     "--enable-mfu-metrics; absent when it does not count)."),
    ("llmtop_engine_achieved_read_bytes_per_second", "achieved_read_bytes_per_s",
     "The engine's own estimate of bytes read from GPU memory per second per GPU."),
    ("llmtop_engine_achieved_write_bytes_per_second", "achieved_write_bytes_per_s",
     "The engine's own estimate of bytes written to GPU memory per second per GPU."),
    ("llmtop_engine_achieved_bytes_per_second", "achieved_bytes_per_s",
     "Read plus written bytes per second per GPU, the engine's estimate."),
    ("llmtop_engine_mbu_ratio", "mbu",
     "Memory-bandwidth utilization: achieved bytes/s over the GPU's peak bandwidth, 0..1 "
     "(absent without a known peak: --gpu-peak)."),
    ("llmtop_engine_mfu_ratio", "mfu",
     "Model FLOPs utilization: achieved FLOP/s over the GPU's dense BF16 peak, 0..1."),
)

QUANTILE_VALUES = (
    ("llmtop_engine_ttft_seconds", "ttft_s", "Time to first token over the window."),
    ("llmtop_engine_itl_seconds", "itl_s", "Inter-token latency over the window."),
    ("llmtop_engine_e2e_seconds", "e2e_s", "End-to-end request latency over the window."),
    ("llmtop_engine_queue_seconds", "queue_s", "Time spent queued over the window."),
)


@dataclass(frozen=True, slots=True)
class Series:
    """One metric name exactly as served (counters with their ``_total``)."""

    name: str
    kind: str
    """``gauge`` | ``counter``."""
    labels: tuple[str, ...]
    help: str


def _engine() -> list[Series]:
    out = [
        Series("llmtop_engine_up", "gauge", ENGINE_LABELS[:4],
               "1 when the target's last scrape was good (state ok or restarted), else 0."),
        Series("llmtop_engine_state", "gauge", (*ENGINE_LABELS[:4], "state"),
               "1 for the target's state (ok, down, http_error, unauthorized, bad_payload, "
               "stale, restarted), 0 for the others."),
        Series("llmtop_engine_info", "gauge", (*ENGINE_LABELS[:4], "version",
                                                "container_runtime", "container", "pod",
                                                "pod_namespace", "netns"),
               "The engine and its version, as detected; where discovery found it in a "
               "container, pod or network namespace, which."),
        Series("llmtop_engine_last_ok_age_seconds", "gauge", ENGINE_LABELS[:4],
               "Seconds since the target's last good scrape."),
    ]
    out += [Series(n, "gauge", ENGINE_LABELS, h) for n, _, h in ENGINE_VALUES]
    out += [Series(n, "gauge", (*ENGINE_LABELS, "quantile"), h) for n, _, h in QUANTILE_VALUES]
    return out


def _router() -> list[Series]:
    r, b = ROUTER_LABELS, BACKEND_LABELS
    return [
        Series("llmtop_router_up", "gauge", r,
               "1 when the router's last scrape was good (state ok or restarted), else 0."),
        Series("llmtop_router_info", "gauge", (*r, "version", "policy"),
               "The router, its version and routing policy, where it says them."),
        Series("llmtop_router_requests_per_second", "gauge", r,
               "Requests the router took per second over the window."),
        Series("llmtop_router_retries_per_second", "gauge", r,
               "Requests the router retried per second over the window."),
        Series("llmtop_router_errors_per_second", "gauge", r,
               "Requests the router failed per second over the window."),
        Series("llmtop_router_backends", "gauge", r, "Backends the router names."),
        Series("llmtop_router_backends_healthy", "gauge", r,
               "Of them, those the router's health checks find healthy."),
        Series("llmtop_router_open_breakers", "gauge", r,
               "Backends whose circuit breaker the router holds open."),
        Series("llmtop_router_latency_seconds", "gauge", (*r, "kind", "quantile"),
               "The router's own latency over the window: kind request (whole request), "
               "ttft, decode_pending (P/D: waiting for the decode worker)."),
        Series("llmtop_router_backend_routed_ratio", "gauge", b,
               "The backend's share of the router's requests over the window, 0..1."),
        Series("llmtop_router_backend_requests_per_second", "gauge", b,
               "Requests the router sent the backend per second over the window."),
        Series("llmtop_router_backend_capacity_ratio", "gauge", b,
               "The backend's share of its pool's capacity (running limit, else KV), 0..1."),
        Series("llmtop_router_backend_healthy", "gauge", b,
               "1 when the router finds the backend healthy, 0 when not."),
        Series("llmtop_router_backend_breaker_open", "gauge", b,
               "1 when the router holds the backend's circuit breaker open, 0 when closed."),
    ]


def _kv() -> list[Series]:
    e, q = ENGINE_LABELS, (*ENGINE_LABELS, "quantile")
    return [
        Series("llmtop_kv_transfer_seconds", "gauge", q,
               "P/D KV transfer time (NIXL, Mooncake, SGLang disaggregation) over the window."),
        Series("llmtop_kv_transfer_latency_now_seconds", "gauge", e,
               "The engine's own KV transfer latency gauge (SGLang, where not a histogram)."),
        Series("llmtop_kv_transfer_bytes_per_second", "gauge", e,
               "KV bytes transferred per second over the window."),
        Series("llmtop_kv_transfer_failures_per_second", "gauge", e,
               "Failed KV transfers (and SGLang bootstrap failures) per second over the window."),
        Series("llmtop_kv_transfer_expired_per_second", "gauge", e,
               "Requests whose KV expired before the decode side took it, per second."),
        Series("llmtop_kv_transfer_queue_requests", "gauge", (*e, "queue"),
               "Requests in a P/D queue (SGLang: prefill bootstrap / inflight, decode prealloc "
               "/ transfer)."),
        Series("llmtop_kv_transfer_stage_seconds", "gauge", (*e, "stage", "quantile"),
               "Time of a P/D stage (bootstrap, alloc, decode_transferred...) over the window."),
        Series("llmtop_kv_prompt_tokens_per_second", "gauge", (*e, "source"),
               "Prompt tokens per second by where they came from (local_compute, "
               "local_cache_hit, external_kv_transfer), on P/D engines."),
        Series("llmtop_kv_offload_hit_ratio", "gauge", (*e, "tier"),
               "KV offload hits / queried over the window, 0..1; tier set on a secondary "
               "tier's own ratio, absent on the engine's total."),
        Series("llmtop_kv_offload_usage_ratio", "gauge", e,
               "KV offload tier (host) capacity in use, 0..1."),
        Series("llmtop_kv_offload_used_bytes", "gauge", e, "KV offload tier bytes in use."),
        Series("llmtop_kv_offload_used_tokens", "gauge", e, "KV offload tier tokens in use."),
        Series("llmtop_kv_offload_pinned_ratio", "gauge", e,
               "Offload (CPU) blocks pinned or in use / capacity, 0..1."),
        Series("llmtop_kv_offload_bytes_per_second", "gauge", (*e, "direction", "tier"),
               "KV bytes per second over the window, direction offload (GPU to tier) or "
               "load_back; tier set on a secondary tier's own rate."),
        Series("llmtop_kv_offload_tokens_per_second", "gauge", (*e, "direction"),
               "KV tokens per second over the window, direction offload, load_back or "
               "evicted."),
        Series("llmtop_kv_offload_blocks_per_second", "gauge", (*e, "direction"),
               "KV blocks per second over the window, direction offload, load_back or "
               "dropped."),
        Series("llmtop_kv_offload_failures_per_second", "gauge", (*e, "tier"),
               "Failed offload / load-back jobs per second over the window; tier set on a "
               "secondary tier's own rate."),
        Series("llmtop_kv_cache_hit_tokens_per_second", "gauge", (*e, "tier"),
               "Prompt tokens served from the KV cache per second, by tier (device, host, "
               "disk...)."),
    ]


SERIES: tuple[Series, ...] = (
    Series("llmtop_exporter_info", "gauge", ("version", "mode"),
           "The llmtop exporter: its version and mode (direct, fleet, record)."),
    Series("llmtop_window_seconds", "gauge", (),
           "The window the engine rates and quantiles are taken over."),
    Series("llmtop_refresh_timestamp_seconds", "gauge", (),
           "Unix time of the snapshot served (the end of the window)."),
    Series("llmtop_refresh_duration_seconds", "gauge", (),
           "Seconds the last refresh took (scrapes or queries, rows, diagnosis)."),
    Series("llmtop_refreshes_total", "counter", (), "Refreshes done."),
    Series("llmtop_refresh_errors_total", "counter", (),
           "Refreshes that failed (fleet mode: the server could not be read)."),
    Series("llmtop_scrape_duration_seconds", "gauge", ("target",),
           "Seconds the last scrape of the target took (direct mode)."),
    Series("llmtop_scrapes_total", "counter", ("target",), "Scrapes of the target (direct mode)."),
    Series("llmtop_scrape_errors_total", "counter", ("target", "state"),
           "Failed scrapes of the target by state: down, http_error, unauthorized, "
           "bad_payload (direct mode)."),
    *_engine(),
    *_router(),
    *_kv(),
    Series("llmtop_log_events_total", "counter", ("target", "severity"),
           "Events in the engine's log since llmtop started following it, by severity "
           "(debug, info, warning, error, critical); a traceback is one event."),
    Series("llmtop_log_readable", "gauge", ("target",),
           "1 when the engine's log is read, 0 when it cannot be (where, or the last read, "
           "failed); absent when no log of it is followed."),
    Series("llmtop_finding", "gauge", (*FINDING_LABELS, "summary"),
           "1 per active finding; summary is its sentence as it reached this severity."),
    Series("llmtop_finding_value", "gauge", (*FINDING_LABELS[:4], "signal"),
           "A finding's evidence: the signal's value over the diagnosis window."),
    Series("llmtop_finding_threshold", "gauge", (*FINDING_LABELS[:4], "signal"),
           "A finding's evidence: the threshold the signal was compared with."),
    Series("llmtop_finding_baseline", "gauge", (*FINDING_LABELS[:4], "signal"),
           "A finding's evidence: the engine's usual value (median of its recent past)."),
    Series("llmtop_diagnosis_window_seconds", "gauge", (),
           "The window the diagnosis rules judge."),
    Series("llmtop_gpu_readable", "gauge", (),
           "1 when the GPUs could be read (NVML, DCGM, Triton or the demo), else 0."),
    Series("llmtop_gpu_up", "gauge", GPU_LABELS, "1 when this GPU could be read, else 0."),
    Series("llmtop_gpu_utilization_ratio", "gauge", GPU_LABELS,
           "Share of time at least one kernel ran (NVML busy time, not work done), 0..1."),
    Series("llmtop_gpu_sm_active_ratio", "gauge", GPU_LABELS,
           "SMs with at least one warp resident, averaged over SMs and time, 0..1 (NVML GPM "
           "or DCGM profiling; absent elsewhere)."),
    Series("llmtop_gpu_sm_occupancy_ratio", "gauge", GPU_LABELS,
           "Resident warps over the SMs' maximum, averaged, 0..1 (GPM or DCGM)."),
    Series("llmtop_gpu_tensor_active_ratio", "gauge", GPU_LABELS,
           "Share of time any tensor pipe was active, 0..1 (GPM or DCGM)."),
    Series("llmtop_gpu_dram_active_ratio", "gauge", GPU_LABELS,
           "DRAM interface busy as a share of its peak bandwidth, 0..1 (GPM or DCGM)."),
    Series("llmtop_gpu_memory_used_bytes", "gauge", GPU_LABELS, "GPU memory in use."),
    Series("llmtop_gpu_memory_total_bytes", "gauge", GPU_LABELS, "GPU memory in all."),
    Series("llmtop_gpu_power_watts", "gauge", GPU_LABELS, "Power draw."),
    Series("llmtop_gpu_power_limit_watts", "gauge", GPU_LABELS, "Power limit."),
    Series("llmtop_gpu_temperature_celsius", "gauge", GPU_LABELS, "GPU temperature."),
    Series("llmtop_gpu_sm_clock_hertz", "gauge", GPU_LABELS, "SM clock."),
    Series("llmtop_gpu_sm_clock_max_hertz", "gauge", GPU_LABELS, "Highest SM clock."),
    Series("llmtop_gpu_throttled", "gauge", GPU_LABELS,
           "1 when a clock-event (throttle) reason is active, else 0."),
    Series("llmtop_gpu_throttle_reason", "gauge", (*GPU_LABELS, "reason"),
           "1 per active clock-event reason (power cap, thermal slowdown...)."),
    Series("llmtop_gpu_process_memory_bytes", "gauge", ("host", "gpu", "pid", "target"),
           "GPU memory held by a process; target is the engine it belongs to, when known."),
)


def series(name: str) -> Series:
    """The ``Series`` called ``name``."""
    for s in SERIES:
        if s.name == name:
            return s
    raise KeyError(name)
