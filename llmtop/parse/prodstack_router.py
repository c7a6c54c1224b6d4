"""The vLLM production-stack router (``production-stack``): its ``/metrics`` re-exports
engine-like ``vllm:*`` gauges labelled ``server`` (the engine's URL), which must never be
counted as engine series (the engines are scraped on their own).

Names (vllm-project/production-stack ``vllm_router`` metrics service): per server
``vllm:current_qps``, ``vllm:healthy_pods_total``, ``vllm:num_requests_running``,
``vllm:num_requests_waiting``, ``vllm:num_prefill_requests``, ``vllm:num_decoding_requests``,
``vllm:avg_latency``, ``vllm:avg_itl``. All gauges: the request rate is the router's own QPS
gauge, not a counter delta.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model.stack import RouterSample
from llmtop.parse.router_common import by_label, make_sample, parse_router, put_backend

__all__ = ["normalize"]

_GAUGES = {"vllm:current_qps": "qps", "vllm:healthy_pods": "healthy",  # index: no _total
           "vllm:num_requests_running": "active", "vllm:num_requests_waiting": "pending",
           "vllm:avg_latency": "avg_latency_s", "vllm:avg_itl": "avg_itl_s"}


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse the production-stack router's ``/metrics``. Raises ``ParseError``."""
    index = parse_router(body, ("vllm:current_qps", "vllm:healthy_pods"),
                         "is this the production-stack router?")
    rs = RouterSample()
    for name, key in _GAUGES.items():
        for server, v in by_label(index, name, "server").items():
            put_backend(rs, server, **{key: v})
    qps = [b.qps for b in rs.backends.values() if b.qps is not None]
    if qps:
        rs.qps = sum(qps)
    return make_sample("production-stack", rs)
