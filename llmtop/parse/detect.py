"""Which engine is behind an endpoint, from its payload and identity (``METRICS.md`` §2).

The payload decides first (cheap substring checks, no full parse); identity endpoints are the
fallback (e.g. a vLLM started with ``--disable-log-stats`` exposes no ``vllm:*`` series):

1. JSON: a list of iteration stats (``iter``, ``iterLatencyMS``, ``kvCacheStats``) -> trtllm
   (``trtllm-serve`` ``/metrics``); ``{"models": [...]}`` -> ollama (``/api/ps``); the llama.cpp
   501 body "Start it with ``--metrics``" -> llamacpp.
2. Prometheus names, by the one prefix table (``llmtop.families``, shared with discovery):
   routers first (``router_from_body``); ``vllm:`` -> vllm, unless the ``vllm:`` samples carry
   ``model=``/``version=`` labels and a Triton ``nv_*`` name is present -> triton (Triton's
   vLLM backend); sglang; triton; trtllm (also the bare TRT-LLM 1.1 names with
   ``engine_type``); tgi, llamacpp, lmdeploy, dcgm, dynamo_worker.
3. Identity (what ``sources.scrape`` keeps): ``owned_by`` (``vllm``, ``sglang``, ``llamacpp``,
   ``tensorrt_llm``, ``lmdeploy``, also inside a ``/v1/models`` list), Triton ``/v2``
   ``{"name": "triton"}`` (top level or under ``triton``), TGI ``/info``
   ``router == "text-generation-router"`` (top level or under ``tgi``), ``ollama`` /
   ``llamacpp`` keys.

Returns an id of ``model.ENGINES`` or None.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llmtop.families import PREFIXES, prefixes_of

__all__ = ["detect_engine", "engine_from_body", "engine_from_identity", "router_from_body"]

_OWNED_BY = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "llama.cpp": "llamacpp",
    "tensorrt_llm": "trtllm",
    "lmdeploy": "lmdeploy",
}
_TRT_ITER_KEYS = ("iter", "iterLatencyMS", "kvCacheStats", "numActiveRequests")
_VLLM_TRITON_LABELS = re.compile(r'^vllm:[^{\s]*\{[^}\n]*\b(?:model|version)="', re.M)
_TRT_BARE = re.compile(
    r"^(?:request_success_total|e2e_request_latency_seconds|time_to_first_token_seconds|"
    r"time_per_output_token_seconds|request_queue_time_seconds)[^{\s]*\{[^}\n]*engine_type=",
    re.M,
)


def _has(body: str, prefix: str) -> bool:
    """A sample, HELP or TYPE line names a metric starting with ``prefix``."""
    return body.startswith(prefix) or ("\n" + prefix) in body or (" " + prefix) in body


def _from_json(body: str) -> str | None:
    s = body.strip()
    try:
        data: Any = json.loads(s)
    except (ValueError, RecursionError):
        data = None
    if data is None:
        # Documented samples elide with "..." and are not valid JSON: look at the keys.
        if s.startswith("[") and ('"iterLatencyMS"' in s or '"kvCacheStats"' in s):
            return "trtllm"
        if s.startswith("{") and '"models"' in s and ('"size_vram"' in s or '"digest"' in s):
            return "ollama"
        return None
    if isinstance(data, list):
        items = [x for x in data if isinstance(x, dict)]
        if items and any(k in items[0] for k in _TRT_ITER_KEYS):
            return "trtllm"
        return None
    if isinstance(data, dict):
        if any(k in data for k in _TRT_ITER_KEYS[:3]):
            return "trtllm"
        models = data.get("models")
        if isinstance(models, list) and all(isinstance(m, dict) for m in models):
            return "ollama"
        err = data.get("error")
        if isinstance(err, dict) and "--metrics" in str(err.get("message", "")):
            return "llamacpp"
    return None


def engine_from_body(body: str | None) -> str | None:
    """The engine a payload alone makes certain, or None."""
    if not body:
        return None
    head = body.lstrip()[:1]
    if head in ("[", "{"):
        found = _from_json(body)
        if found is not None:
            return found
    if "Start it with `--metrics`" in body or "does not support metrics endpoint" in body:
        return "llamacpp"
    router = router_from_body(body)
    if router is not None:
        return router
    nv = _names(body, "triton")
    if _names(body, "vllm"):
        if nv and _VLLM_TRITON_LABELS.search(body):
            return "triton"
        return "vllm"
    if _names(body, "sglang"):
        return "sglang"
    if nv:
        return "triton"
    if _TRT_BARE.search(body):
        return "trtllm"
    for family in _LATER:  # a Dynamo worker without its engine's series comes last
        if _names(body, family):
            return family
    return None


_LATER = ("trtllm", "tgi", "llamacpp", "lmdeploy", "dcgm", "dynamo_worker")
"""The engine families matched after vLLM, SGLang and Triton, in ``families.PREFIXES``
order."""


def _names(body: str, family: str) -> bool:
    """``body`` names a metric of ``family`` (by ``families.PREFIXES``)."""
    return any(_has(body, p) for p in prefixes_of(family))


_ROUTER_PREFIXES = tuple((p, f) for p, f, kind in PREFIXES if kind == "router")
"""Router families by metric-name prefix, in ``families.PREFIXES`` order."""


def router_from_body(body: str) -> str | None:
    """The router family (``model.stack.ROUTERS``) a Prometheus payload names, or None."""
    for prefix, family in _ROUTER_PREFIXES:
        if _has(body, prefix):
            return family
    return None


def _owned_by(identity: dict[str, Any]) -> str | None:
    candidates: list[Any] = [identity.get("owned_by")]
    for key in ("models", "v1_models", "/v1/models"):
        lst = identity.get(key)
        if isinstance(lst, dict):
            lst = lst.get("data")
        if isinstance(lst, list):
            candidates += [m.get("owned_by") for m in lst if isinstance(m, dict)]
    for ob in candidates:
        if isinstance(ob, str) and ob.lower() in _OWNED_BY:
            return _OWNED_BY[ob.lower()]
    return None


def engine_from_identity(identity: dict[str, Any] | None) -> str | None:
    """The engine identity endpoints make certain, or None."""
    if not isinstance(identity, dict) or not identity:
        return None
    for tri in (identity.get("triton"), identity.get("v2"), identity):
        if isinstance(tri, dict) and str(tri.get("name", "")).lower() == "triton":
            return "triton"
    found = _owned_by(identity)
    if found is not None:
        return found
    for tgi in (identity.get("tgi"), identity.get("info"), identity):
        if isinstance(tgi, dict) and tgi.get("router") == "text-generation-router":
            return "tgi"
    if "ollama" in identity:
        return "ollama"
    if "llamacpp" in identity:
        return "llamacpp"
    engine = identity.get("engine")
    if isinstance(engine, str) and engine in _ENGINES:
        return engine
    return None


_ENGINES = frozenset(
    ("vllm", "sglang", "triton", "trtllm", "tgi", "llamacpp", "lmdeploy", "ollama", "dcgm",
     "dynamo_worker")
)


def detect_engine(
    body: str | None, content_type: str | None = None, identity: dict[str, Any] | None = None
) -> str | None:
    """The engine behind a scrape: the payload first, then the identity endpoints."""
    return engine_from_body(body) or engine_from_identity(identity)
