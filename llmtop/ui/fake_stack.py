"""The ``stack`` scenario of ``FakeSource``: two vLLM routers in front of vLLM engines.

``vllm-router :29000`` (round robin) sends half of its requests to ``:8002``, which holds
one request at a time and queues, while ``:8001`` (8 seats) idles: the case the
``routing`` finding names.
``vllm-router :29001`` (P/D) sends each request to a prefill pool (``:8101``, ``:8102``)
and then to a decode pool (``:8201``, ``:8202``). Fixed numbers, linked by the real
``topology.link_stack``; the router names and policies are those the routers export.
"""

from __future__ import annotations

from llmtop.model import EngineRow, GpuRecord, Quantiles, Snapshot
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.link import link_stack

__all__ = ["STACK_MODEL", "stack_snapshot"]

STACK_MODEL = "Qwen/Qwen3-0.6B"


def _q(p50: float, p95: float, n: float = 50.0) -> Quantiles:
    return Quantiles(p50=p50, p90=p50 + (p95 - p50) * 0.8, p95=p95, p99=p95 * 1.2,
                     mean=p50 * 1.1, count=n)


def _engine(port: int, *, run: float, wait: float, seats: float, kv: float, ttft: tuple,
            queue: float, prefill: float, rps: float, tps: float) -> EngineRow:
    target = f"vllm@127.0.0.1:{port}"
    return EngineRow(key=f"{target}|{STACK_MODEL}", target=target, engine="vllm",
                     engine_version="0.11.0", model=STACK_MODEL, last_ok_age_s=0.4,
                     running=run, waiting=wait, max_running=seats, kv_cache_usage=kv,
                     ttft_s=_q(*ttft), itl_s=_q(0.03, 0.05), queue_s=_q(queue, queue * 2),
                     prefill_s=_q(prefill, prefill * 1.5), e2e_s=_q(2.0, 4.0),
                     requests_per_s=rps, generation_tokens_per_s=tps, errors_per_s=0.0,
                     preemptions_per_s=0.0)


def _backend(port: int, share: float, rps: float, role: str | None = None,
             healthy: bool = True) -> BackendRow:
    return BackendRow(url=f"http://127.0.0.1:{port}", role=role, healthy=healthy,
                      breaker_open=False, routed_share=share, requests_per_s=rps)


def stack_snapshot(t: float, gpus: list[GpuRecord]) -> Snapshot:
    """The two routers, their six backends and the GPUs."""
    engines = [
        _engine(8001, run=1, wait=0, seats=8, kv=0.04, ttft=(0.09, 0.2), queue=0.001,
                prefill=0.05, rps=1.5, tps=60.0),
        _engine(8002, run=1, wait=9, seats=1, kv=0.01, ttft=(3.1, 6.4), queue=3.0,
                prefill=0.05, rps=1.5, tps=11.0),
        _engine(8101, run=2, wait=3, seats=4, kv=0.2, ttft=(0.7, 1.4), queue=0.5,
                prefill=0.18, rps=2.0, tps=2.0),
        _engine(8102, run=3, wait=2, seats=4, kv=0.25, ttft=(0.6, 1.2), queue=0.4,
                prefill=0.2, rps=2.0, tps=2.0),
        _engine(8201, run=6, wait=0, seats=16, kv=0.41, ttft=(0.9, 1.7), queue=0.01,
                prefill=0.02, rps=2.0, tps=150.0),
        _engine(8202, run=5, wait=0, seats=16, kv=0.38, ttft=(0.95, 1.8), queue=0.01,
                prefill=0.02, rps=2.0, tps=140.0),
    ]
    rr = RouterRow(target="vllm-router@127.0.0.1:29000", engine="vllm-router",
                   engine_version="0.1.17", policy="round_robin", last_ok_age_s=0.3,
                   requests_per_s=3.0, retries_per_s=0.0, errors_per_s=0.0,
                   healthy_backends=2, total_backends=2, open_breakers=0,
                   request_s=_q(2.4, 8.0),
                   backends=[_backend(8001, 0.5, 1.5), _backend(8002, 0.5, 1.5)])
    pd = RouterRow(target="vllm-router@127.0.0.1:29001", engine="vllm-router",
                   engine_version="0.1.17", policy="round_robin", last_ok_age_s=0.3,
                   requests_per_s=4.0, retries_per_s=0.0, errors_per_s=0.0,
                   healthy_backends=4, total_backends=4, open_breakers=0,
                   request_s=_q(3.5, 6.0), ttft_s=_q(1.3, 2.4),
                   decode_pending_s=_q(0.15, 0.3),
                   backends=[_backend(8101, 0.5, 2.0, "prefill"),
                             _backend(8102, 0.5, 2.0, "prefill"),
                             _backend(8201, 0.5, 2.0, "decode"),
                             _backend(8202, 0.5, 2.0, "decode")])
    routers = [rr, pd]
    link_stack(engines, routers, {e.target: "http://" + e.target.split("@", 1)[1]
                                  for e in engines})
    return Snapshot(time=t, window_s=10.0, engines=engines, gpus=gpus, routers=routers)
