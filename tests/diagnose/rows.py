"""Builders of EngineRow / Baseline / GpuRecord shapes for the diagnosis tests.

Magnitudes follow real engine output (tests/fixtures/metrics/vllm-real-cpu-v0.32.0-under-load
.txt and the vLLM docs' bucket layouts): queue/prefill buckets start at 0.3 s, prompt-token
buckets run 1-2-5 (… 200, 500, 1000), ITL ~30 ms, running 8 of max_num_seqs 8.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from llmtop.diagnose.baseline import Baseline
from llmtop.model import EngineRow, GpuProcess, GpuRecord, Quantiles

__all__ = ["HEALTHY_BASE", "T", "base", "gpu", "healthy", "q"]

T = "vllm@127.0.0.1:8000"


def q(p50: float | None, p95: float | None, n: float, p90: float | None = None) -> Quantiles:
    """Quantiles of ``n`` observations (p90 defaults to between p50 and p95)."""
    if p90 is None and p50 is not None and p95 is not None:
        p90 = (p50 + p95) / 2
    return Quantiles(p50=p50, p90=p90, p95=p95, p99=p95, mean=p50, count=n)


def healthy(target: str = T, model: str = "llama", **kw: Any) -> EngineRow:
    """A vLLM row at steady, healthy load over a 30 s window (60 requests)."""
    r = EngineRow(
        key=f"{target}|{model}", target=target, engine="vllm", model=model, state="ok",
        running=6.0, waiting=0.0, max_running=8.0, kv_cache_usage=0.45, prefix_hit_rate=0.62,
        ttft_s=q(0.12, 0.35, 60), itl_s=q(0.03, 0.045, 6000), tpot_s=q(0.031, 0.04, 60),
        e2e_s=q(6.0, 9.0, 60), queue_s=q(0.05, 0.2, 60), prefill_s=q(0.08, 0.25, 60),
        decode_s=q(5.8, 8.5, 60), prompt_len=q(380, 900, 60, p90=700),
        gen_len=q(200, 400, 60), requests_per_s=2.0, preemptions_per_s=0.0, errors_per_s=0.0,
        finished={"stop": 50.0, "length": 10.0},
    )
    return replace(r, **kw)


HEALTHY_BASE: dict[str, float] = {
    "ttft_p50": 0.12, "ttft_p95": 0.35, "queue_p50": 0.05, "queue_p95": 0.2,
    "prefill_p50": 0.08, "prefill_p95": 0.25, "itl_p50": 0.03, "itl_p95": 0.045,
    "tpot_p50": 0.031, "tpot_p95": 0.04, "prompt_p50": 380.0, "prompt_p90": 700.0,
    "hit_rate": 0.62, "running": 6.0, "waiting": 0.0, "kv": 0.45, "req_s": 2.0,
    "spec_accept": 0.7,
}


def base(**over: float) -> Baseline:
    """The healthy row's baseline (15 min of points), with overrides."""
    return Baseline({**HEALTHY_BASE, **over}, points=90, span_s=890.0)


def gpu(index: int = 0, *, throttle: list[str] | None = None, clock: float = 1755.0,
        util: float = 0.9, target: str | None = T) -> GpuRecord:
    """An H100-like GPU holding ``target``'s memory."""
    procs = [GpuProcess(pid=4242, name="python3", used_bytes=60 << 30, engine_target=target)]
    return GpuRecord(host="", index=index, source="nvml", name="NVIDIA H100 80GB HBM3",
                     util=util, sm_clock_mhz=clock, sm_clock_max_mhz=1980.0, temp_c=71.0,
                     temp_slowdown_c=87.0, throttle=throttle if throttle is not None else [],
                     power_w=690.0, power_limit_w=700.0, processes=procs)
