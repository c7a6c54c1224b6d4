"""Render vLLM's KV-offload Prometheus text with vLLM's own metric classes (no server).

Run with the cached vLLM: ``~/.cache/llmtop/vllm-venv/bin/python scripts/real_vllm/kv_offload_text.py``.
It builds vLLM's ``OffloadPromMetrics`` (offloading connector, ``TieringOffloadingSpec`` with
an ``fs`` secondary tier) and ``SimpleCPUOffloadPromMetrics`` on a private registry, feeds
each one stats payload (the values are SYNTHETIC, chosen here) and prints the exposition
text: the names, labels, types and HELP are vLLM's. The llmtop fixture
``tests/fixtures/stack/vllm-kv-offload-SYNTHETIC.txt`` is its output.
"""

from __future__ import annotations

import functools
import sys
from types import SimpleNamespace

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

import vllm
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.metrics import (
    OffloadingConnectorStats,
    OffloadPromMetrics,
)
from vllm.v1.simple_kv_offload.metrics import SimpleCPUOffloadPromMetrics, SimpleCPUOffloadStats

__all__: list[str] = []

LABELS = ["model_name", "engine"]
ENGINE = {0: ["Qwen/Qwen3-0.6B", "0"]}


def _types(reg: CollectorRegistry) -> dict:
    return {Counter: functools.partial(Counter, registry=reg),
            Gauge: functools.partial(Gauge, registry=reg),
            Histogram: functools.partial(Histogram, registry=reg)}


def offloading(reg: CollectorRegistry) -> None:
    extra = {"spec_name": "TieringOffloadingSpec", "secondary_tiers": [{"type": "fs"}]}
    cfg = SimpleNamespace(kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra))
    prom = OffloadPromMetrics(cfg, _types(reg), LABELS, ENGINE)
    s = OffloadingConnectorStats()
    s.increase_counter("vllm:kv_offload_store_bytes", 8.0e9)
    s.increase_counter("vllm:kv_offload_store_time", 4.0)
    s.increase_counter("vllm:kv_offload_load_bytes", 2.0e9)
    s.increase_counter("vllm:kv_offload_load_time", 1.25)
    for v in (2e6, 8e6, 30e6):
        s.observe_histogram("vllm:kv_offload_store_size", v)
        s.observe_histogram("vllm:kv_offload_load_size", v / 2)
    s.increase_counter("vllm:kv_offload_allocation_failure", 2)
    for tier, q, h in (("0:primary", 1000, 600), ("1:fs", 400, 100)):
        s.increase_counter("vllm:kv_offload_tiering_chunk_queries", q, (tier,))
        s.increase_counter("vllm:kv_offload_tiering_chunk_hits", h, (tier,))
        s.observe_histogram("vllm:kv_offload_tiering_lookup_sync_delay_seconds", 0.0002, (tier,))
    fs = ("1:fs",)
    s.increase_counter("vllm:kv_offload_tiering_read_bytes", 1.0e9, fs)
    s.increase_counter("vllm:kv_offload_tiering_read_time", 2.0, fs)
    s.increase_counter("vllm:kv_offload_tiering_write_bytes", 3.0e9, fs)
    s.increase_counter("vllm:kv_offload_tiering_write_time", 6.0, fs)
    s.increase_counter("vllm:kv_offload_tiering_promotion_job_failures", 1, fs)
    s.increase_counter("vllm:kv_offload_tiering_cascade_job_failures", 3, fs)
    s.observe_histogram("vllm:kv_offload_tiering_lookup_async_delay_seconds", 0.02, fs)
    s.set_gauge("vllm:kv_offload_tiering_active_promotion_jobs", 1, fs)
    s.set_gauge("vllm:kv_offload_tiering_active_cascade_jobs", 2, fs)
    s.set_gauge("vllm:kv_offload_cpu_cache_usage_perc", 0.25)
    prom.observe(s.data)


def simple(reg: CollectorRegistry) -> None:
    prom = SimpleCPUOffloadPromMetrics(SimpleNamespace(kv_transfer_config=None), _types(reg),
                                       LABELS, ENGINE)
    s = SimpleCPUOffloadStats()
    s.increase_counter("vllm:simple_kv_offload_save_outcomes_total", 500, ("stored",))
    s.increase_counter("vllm:simple_kv_offload_save_outcomes_total", 20, ("dropped_cpu_full",))
    s.increase_counter("vllm:simple_kv_offload_load_blocks_total", 120)
    s.set_gauge("vllm:simple_kv_offload_used_blocks", 40)
    s.set_gauge("vllm:simple_kv_offload_pending_store_blocks", 5)
    s.set_gauge("vllm:simple_kv_offload_info", 1, ("cpu", "false", "false", "4096"))
    prom.observe(s.data)


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "offloading"
    prometheus_client.disable_created_metrics()  # as vLLM's serving process does
    reg = CollectorRegistry()
    for name, doc, v in (("vllm:num_requests_running",
                          "Number of requests in model execution batches.", 2),
                         ("vllm:num_requests_waiting",
                          "Number of requests waiting to be processed.", 0)):
        Gauge(name, doc, LABELS, registry=reg).labels(*ENGINE[0]).set(v)
    (simple if which == "simple" else offloading)(reg)
    sys.stdout.write(f"# source: vLLM {vllm.__version__} (pip wheel) own metric classes, "
                     f"rendered by scripts/real_vllm/kv_offload_text.py {which} "
                     "(plus the engine's running/waiting gauges); SYNTHETIC values\n")
    sys.stdout.write(generate_latest(reg).decode())


if __name__ == "__main__":
    main()
