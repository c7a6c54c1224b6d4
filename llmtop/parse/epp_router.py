"""Gateway API Inference Extension endpoint picker (``gie-epp``) and llm-d's (``llm-d-epp``),
from the EPP's ``/metrics`` (default port 9090).

Names (kubernetes-sigs/gateway-api-inference-extension ``pkg/epp/metrics``): requests
``inference_objective_request_total`` (older ``inference_model_request_total``), their
duration and errors; the pool: ``inference_pool_ready_pods``,
``inference_pool_average_kv_cache_utilization``, ``inference_pool_average_queue_size`` and per
pod ``inference_pool_per_pod_queue_size{model_server_pod}``. llm-d's EPP adds
``llm_d_epp_*`` (``llm_d_epp_per_endpoint_queue_size{model_server_endpoint}``,
``llm_d_epp_ready_endpoints``, ``llm_d_epp_pd_decision_total{decision_type}``). Backends are
named by pod or endpoint, not URL: they are linked to engine rows only when that name is a
host:port. The EPP scores pods, it has no policy name.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model.stack import RouterSample
from llmtop.parse.router_common import (
    Index,
    by_label,
    first_hist,
    make_sample,
    parse_router,
    put_backend,
    total,
)

__all__ = ["normalize", "read"]

_PREFIXES = ("inference_objective_", "inference_model_", "inference_pool_",
             "inference_extension_", "llm_d_epp_", "llm_d_router_epp_")


def _first_total(index: Index, *names: str) -> float | None:
    for n in names:
        v = total(index, n)
        if v is not None:
            return v
    return None


def read(index: Index) -> RouterSample:
    """The ``RouterSample`` of an endpoint picker."""
    rs = RouterSample()
    for name, label in (("inference_pool_per_pod_queue_size", "model_server_pod"),
                        ("llm_d_epp_per_endpoint_queue_size", "model_server_endpoint")):
        for pod, v in by_label(index, name, label).items():
            put_backend(rs, pod, pending=v)
    rs.requests = _first_total(index, "inference_objective_request", "inference_model_request")
    rs.errors = _first_total(index, "inference_objective_request_error",
                             "inference_model_request_error")
    rs.ready_backends = _first_total(index, "llm_d_epp_ready_endpoints",
                                     "inference_pool_ready_pods")
    rs.pool_kv_usage = _first_total(index, "inference_pool_average_kv_cache_utilization")
    rs.pool_queue = _first_total(index, "inference_pool_average_queue_size")
    rs.request = first_hist(index, "inference_objective_request_duration_seconds",
                            "inference_model_request_duration_seconds")
    return rs


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse an endpoint picker's ``/metrics``. Raises ``ParseError``."""
    index = parse_router(body, _PREFIXES, "is this an endpoint picker's metrics port?")
    llm_d = any(k.startswith(("llm_d_epp_", "llm_d_router_epp_")) for k in index)
    return make_sample("llm-d-epp" if llm_d else "gie-epp", read(index))
