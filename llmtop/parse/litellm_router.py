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
from llmtop.model.stack import RouterSample
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
        put_backend(rs, url, healthy=1.0 if v == 0 else 0.0,
                    breaker=1.0 if v >= OUTAGE else 0.0)
    for url, v in by_label(index, "litellm_deployment_total_requests", "api_base").items():
        put_backend(rs, url, routed=v)
    for url, v in by_label(index, "litellm_deployment_failure_responses", "api_base").items():
        put_backend(rs, url, failures=v)
    rs.requests = total(index, "litellm_proxy_total_requests_metric")
    rs.errors = total(index, "litellm_proxy_failed_requests_metric")
    rs.inflight = total(index, "litellm_in_flight_requests")
    rs.request = first_hist(index, "litellm_request_total_latency_metric")
    rs.ttft = first_hist(index, "litellm_llm_api_time_to_first_token_metric")
    return make_sample("litellm", rs)
