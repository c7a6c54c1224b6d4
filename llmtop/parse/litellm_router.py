"""The LiteLLM proxy (``litellm``): ``litellm_*`` on its ``/metrics`` (port 4000).

Names (BerriAI/litellm ``litellm/integrations/prometheus.py``): per deployment, labelled
``litellm_model_name``, ``model_id``, ``api_base`` (its URL), ``api_provider``:
``litellm_deployment_state`` (0 healthy, 1 partial outage, 2 complete outage),
``litellm_deployment_total_requests``, ``litellm_deployment_failure_responses``; the proxy:
``litellm_proxy_total_requests_metric``, ``litellm_proxy_failed_requests_metric``,
``litellm_request_total_latency_metric`` and ``litellm_llm_api_time_to_first_token_metric``
(histograms, seconds), ``litellm_in_flight_requests``.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model_stack import RouterSample
from llmtop.parse.router_common import (
    by_label,
    first_hist,
    make_sample,
    parse_router,
    put_backend,
    total,
)

__all__ = ["normalize"]

OUTAGE = 2.0
"""``litellm_deployment_state`` of a complete outage: LiteLLM cools the deployment down."""


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse a LiteLLM proxy's ``/metrics``. Raises ``ParseError``."""
    index = parse_router(body, ("litellm_",), "is this a LiteLLM proxy?")
    rs = RouterSample()
    for url, v in by_label(index, "litellm_deployment_state", "api_base").items():
        put_backend(rs, url, gauges={"healthy": 1.0 if v == 0 else 0.0,
                                     "breaker": 1.0 if v >= OUTAGE else 0.0})
    for name, key in (("litellm_deployment_total_requests", "routed"),
                      ("litellm_deployment_failure_responses", "failures")):
        for url, v in by_label(index, name, "api_base").items():
            put_backend(rs, url, counters={key: v})
    for key, name in (("requests", "litellm_proxy_total_requests_metric"),
                      ("errors", "litellm_proxy_failed_requests_metric")):
        v = total(index, name)
        if v is not None:
            rs.counters[key] = v
    inflight = total(index, "litellm_in_flight_requests")
    if inflight is not None:
        rs.gauges["inflight"] = inflight
    for key, name in (("request", "litellm_request_total_latency_metric"),
                      ("ttft", "litellm_llm_api_time_to_first_token_metric")):
        h = first_hist(index, name)
        if h is not None:
            rs.hists[key] = h
    return make_sample("litellm", rs)
