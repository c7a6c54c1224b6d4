"""A Dynamo backend worker's system port (``DYN_SYSTEM_PORT``: 8081 in the docs, 9090 in
Kubernetes) when it serves only Dynamo's own ``dynamo_component_*`` series (``dynamo_worker``).
A worker that also passes its engine's series through (``vllm:*``, ``sglang:*``) is read by
that engine's adapter, which takes the role from the same label (``role_info``).

Source: ai-dynamo/dynamo ``docs/observability/metrics.md`` ("Backend Component Metrics"),
``lib/runtime/src/metrics/prometheus_names.rs``, ``components/src/dynamo/common/utils/
prometheus.py``. Labels ``dynamo_namespace``, ``dynamo_component``, ``dynamo_endpoint``;
``model`` / ``model_name`` on inference endpoints (vLLM, TRT-LLM; SGLang ``model`` only).

* only the ``generate`` endpoint is a request (``clear_kv_blocks``, ``load_metrics``,
  ``worker_kv_indexer_query_dp*`` are admin RPCs); components ``router``, ``Planner``,
  ``kvbm``, ``sequences`` are not workers (a standalone router's port has nothing else: a
  ParseError, not an empty engine).
* ``running`` = ``inflight_requests``: requests inside the worker's ``generate`` handler,
  which includes any its engine still queues (``waiting`` is not reported: None).
* ``requests`` / ``errors`` = ``requests_total`` / ``errors_total``; ``e2e`` =
  ``request_duration_seconds`` (the handler's time, first byte in to last byte out).
* ``kv_usage`` = Σ ``kvstats_active_blocks`` / Σ ``kvstats_total_blocks`` when both are there;
  else ``kvstats_gpu_cache_usage_percent``, which Dynamo's source documents as a 0.0-1.0
  fraction despite the name (its HELP says so; ``DASHBOARD_METRICS.md`` shows it as
  0-100 %, a display unit); a value above 1 can only be a 0-100 reading and is divided by 100.
  ``kvstats_gpu_prefix_cache_hit_rate`` (0-1, the engine's own window) is
  ``prefix_hit_rate_gauge``.
* role (``info["kv_role"]``): ``dynamo_component="prefill"`` is the prefill worker;
  ``backend`` is the decode worker in disaggregated serving **and** the aggregated worker
  (the docs' "Component Names"), so it says nothing: None. A ``decode`` component (the
  runtime's planned name) is decode.
"""

from __future__ import annotations

import math
from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse.common import assemble, build_hists, identity_model, identity_version
from llmtop.parse.exposition import Family, ParseError, parse

__all__ = ["NOT_WORKERS", "ROLE_FAMILIES", "normalize", "role_info", "set_role"]

P = "dynamo_component_"
NOT_WORKERS = frozenset({"router", "Planner", "planner", "kvbm", "sequences", "frontend"})
"""``dynamo_component`` values that are not inference workers."""
_ROLES = {"prefill": "prefill", "decode": "decode"}
_REQUEST = ("requests", "inflight_requests", "errors", "request_duration_seconds")
ROLE_FAMILIES = frozenset(P + n for n in _REQUEST)
"""The families ``role_info`` reads (an engine adapter keeps them for it)."""


def _ok(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def _is_request(labels: dict[str, str]) -> bool:
    return (labels.get("dynamo_component") not in NOT_WORKERS
            and labels.get("dynamo_endpoint", "generate") == "generate")


def role_info(families: dict[str, Family]) -> str | None:
    """The role the ``dynamo_component`` label of a worker's ``generate`` series names
    (``prefill`` / ``decode``), else None (``backend``: decode or aggregated)."""
    for name in _REQUEST:
        fam = families.get(P + name)
        for s in fam.samples if fam is not None else ():
            if _is_request(s.labels) and (role := _ROLES.get(
                    s.labels.get("dynamo_component", ""))) is not None:
                return role
    return None


def set_role(families: dict[str, Family], parts: Any) -> None:
    """Give each ``ModelSample`` of ``parts`` (a dict) the Dynamo role, unless it has one."""
    role = role_info(families)
    if role is not None:
        for m in parts.values():
            m.info.setdefault("kv_role", role)


def _sum(fam: Family | None, model: str, suffix: str = "") -> float | None:
    if fam is None:
        return None
    vals = [s.value for s in fam.samples if s.name == fam.name + suffix and _ok(s.value)
            and _is_request(s.labels) and _model(s.labels, model) == model]
    return sum(vals) if vals else None


def _model(labels: dict[str, str], default: str) -> str:
    return labels.get("model") or labels.get("model_name") or default


def _hist(fam: Family | None, model: str) -> Any:
    for (m, mn), h in build_hists(fam, ("model", "model_name"),
                                  where={"dynamo_endpoint": "generate"}).items():
        if (m or mn or model) == model:
            return h
    return None


def _kv(families: dict[str, Family]) -> float | None:
    def total(name: str) -> float | None:
        fam = families.get(P + "kvstats_" + name)
        vals = [s.value for s in fam.samples if _ok(s.value)] if fam is not None else []
        return sum(vals) if vals else None

    active, blocks = total("active_blocks"), total("total_blocks")
    if active is not None and blocks:
        return min(1.0, max(0.0, active / blocks))
    fam = families.get(P + "kvstats_gpu_cache_usage_percent")
    vals = [s.value for s in fam.samples if _ok(s.value) and s.value >= 0] if fam else []
    if not vals:
        return None
    v = max(vals)
    return min(1.0, v / 100 if v > 1 else v)


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse a Dynamo worker's ``/metrics``. Raises ``ParseError``."""
    families = parse(body, want=lambda n: n.startswith(P))
    workers = [s for f in families.values() for s in f.samples
               if s.labels.get("dynamo_component") not in NOT_WORKERS]
    if not workers:
        raise ParseError("no dynamo_component_* worker metrics (a Dynamo router or planner, "
                         "or not Dynamo)")
    default = identity_model(identity, "dynamo")
    models = {_model(s.labels, default) for n in _REQUEST if (f := families.get(P + n))
              for s in f.samples if _is_request(s.labels)} or {default}
    if len(models) > 1:
        models.discard(default)  # admin endpoints carry no model label
    parts: dict[tuple[str, str | None], ModelSample] = {}
    kv = _kv(families)
    hit = families.get(P + "kvstats_gpu_prefix_cache_hit_rate")
    hits = [s.value for s in hit.samples if _ok(s.value)] if hit is not None else []
    role = role_info(families)
    for model in sorted(models):
        m = parts[(model, None)] = ModelSample(model=model)
        if (v := _sum(families.get(P + "inflight_requests"), model)) is not None:
            m.gauges["running"] = v
        for key, name in (("requests", "requests"), ("errors", "errors")):
            if (v := _sum(families.get(P + name), model, "_total")) is not None:
                m.counters[key] = v
        if (h := _hist(families.get(P + "request_duration_seconds"), model)) is not None:
            m.hists["e2e"] = h
        if kv is not None:
            m.gauges["kv_usage"] = kv
        if hits:
            m.gauges["prefix_hit_rate_gauge"] = min(1.0, max(hits))
        if role is not None:
            m.info["kv_role"] = role
    sample = assemble("dynamo_worker", parts)
    sample.version = identity_version(identity)
    return sample
