"""Which engine or router family a metric name belongs to: one table, by name prefix.

Read by both discovery (``discovery.probe.sniff_engine``: the first bytes of an unknown port's
``/metrics``) and parsing (``parse.detect``: every scrape), so the two always agree.

- ``PREFIXES``: ``(prefix, family, kind)`` rows, in the order a payload is matched.
- ``family_of(text)``: the first family whose prefix starts a line of ``text``, or None.
- ``prefixes_of(family)``: the prefixes that name one family.

Order matters where one server exports another's names:

- routers first: the production-stack router re-exports its engines' ``vllm:*`` series, and
  llm-d's EPP also exports the Inference Extension's ``inference_*`` names;
- Triton's ``nv_*`` before ``vllm:``: Triton's vLLM backend also exports ``vllm:*``;
- ``dynamo_component_`` last: a Dynamo worker passes its engine's series through.

To add a family: a row here, its parser (``parse/``) and, for a router, ``model.stack.ROUTERS``.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["PREFIXES", "Kind", "family_of", "prefixes_of"]

Kind = Literal["router", "engine"]

PREFIXES: tuple[tuple[str, str, Kind], ...] = (
    ("vllm_router_", "vllm-router", "router"),
    ("smg_", "sglang-router", "router"),
    ("sgl_router_", "sglang-router", "router"),
    ("llm_d_epp_", "llm-d-epp", "router"),
    ("llm_d_router_epp_", "llm-d-epp", "router"),
    ("inference_objective_", "gie-epp", "router"),
    ("inference_pool_", "gie-epp", "router"),
    ("inference_extension_", "gie-epp", "router"),
    ("inference_model_", "gie-epp", "router"),
    ("dynamo_frontend_", "dynamo", "router"),
    ("vllm:current_qps", "production-stack", "router"),
    ("vllm:healthy_pods_total", "production-stack", "router"),
    ("litellm_", "litellm", "router"),
    ("nv_inference_", "triton", "engine"),
    ("nv_gpu_", "triton", "engine"),
    ("nv_trt_llm_", "triton", "engine"),
    ("nv_llm_", "triton", "engine"),
    ("vllm:", "vllm", "engine"),
    ("sglang:", "sglang", "engine"),
    ("sglang_", "sglang", "engine"),
    ("trtllm_", "trtllm", "engine"),
    ("trtllm:", "trtllm", "engine"),
    ("tgi_", "tgi", "engine"),
    ("llamacpp:", "llamacpp", "engine"),
    ("lmdeploy:", "lmdeploy", "engine"),
    ("DCGM_FI_", "dcgm", "engine"),
    ("dynamo_component_", "dynamo_worker", "engine"),
)
"""Metric-name prefix -> family (``model.ENGINES`` or ``model.stack.ROUTERS``), in match
order."""


def _starts_a_line(text: str, prefix: str) -> bool:
    return text.startswith(prefix) or ("\n" + prefix) in text


def family_of(text: str) -> str | None:
    """The family of the first ``PREFIXES`` row whose prefix starts a line of ``text``, or
    None."""
    for prefix, family, _kind in PREFIXES:
        if _starts_a_line(text, prefix):
            return family
    return None


def prefixes_of(family: str) -> tuple[str, ...]:
    """Every prefix that names ``family``."""
    return tuple(p for p, f, _ in PREFIXES if f == family)
