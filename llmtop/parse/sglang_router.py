"""SGLang Model Gateway / sglang-router (``pip install sglang-router``): ``smg_*`` on its
``--prometheus-port`` (default 29000), older releases ``sgl_router_*``. Names from
``sgl-project/sglang`` ``sgl-model-gateway/src/observability/metrics.rs``.

Per worker (``worker`` label = its URL): ``smg_worker_health``, ``smg_worker_cb_state``,
``smg_worker_requests_active``, ``smg_worker_cb_outcomes_total{outcome}`` (every request
routed to it ends as one outcome: their sum is what it was sent). Router level:
``smg_router_requests_total``, ``smg_router_request_duration_seconds``,
``smg_router_ttft_seconds``, ``smg_worker_retries_total``, ``smg_router_request_errors_total``,
``smg_worker_selection_total{policy}``, ``smg_worker_pool_size{worker_type}``.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model.stack import RouterSample
from llmtop.parse import vllm_router
from llmtop.parse.router_common import (
    Index,
    by_label,
    first_hist,
    make_sample,
    parse_router,
    policy_of,
    put_backend,
    total,
)

__all__ = ["normalize", "read_smg"]

SMG = "smg_"
OLD = "sgl_router_"


def read_smg(index: Index) -> RouterSample:
    """The ``RouterSample`` of ``smg_*`` names."""
    rs = RouterSample(policy=policy_of(index, SMG + "worker_selection"))
    for name, key in (("worker_health", "healthy"), ("worker_cb_state", "breaker"),
                      ("worker_requests_active", "active")):
        for url, v in by_label(index, SMG + name).items():
            put_backend(rs, url, **{key: v})
    for url, v in by_label(index, SMG + "worker_cb_outcomes").items():
        put_backend(rs, url, routed=v)
    for url, v in by_label(index, SMG + "worker_cb_outcomes", where={"outcome": "failure"}
                           ).items():
        put_backend(rs, url, failures=v)
    rs.requests = total(index, SMG + "router_requests")
    rs.retries = total(index, SMG + "worker_retries")
    rs.errors = total(index, SMG + "router_request_errors")
    pools = by_label(index, SMG + "worker_pool_size", "worker_type")
    if pools:
        rs.active_workers = sum(pools.values())
    rs.request = first_hist(index, SMG + "router_request_duration_seconds")
    rs.ttft = first_hist(index, SMG + "router_ttft_seconds")
    return rs


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse an SGLang router's ``/metrics`` (either generation). Raises ``ParseError``."""
    index = parse_router(body, (SMG, OLD), "is this an SGLang router's metrics port?")
    if any(k.startswith(SMG) for k in index):
        return make_sample("sglang-router", read_smg(index))
    return make_sample("sglang-router", vllm_router.read(index, OLD))
