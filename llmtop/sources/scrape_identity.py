"""Identity of a target: which engine, version and models its identity endpoints name
(``/version``, ``/v1/models``, ``/v2``, ``/info``, ``/props``, ``/api/version``,
``/server_info``), and the metrics path that follows from it. Only whitelisted fields are kept
(SGLang's ``/server_info`` contains its ``api_key``: never copied).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from llmtop.config import Target
from llmtop.sources.scrape_http import HttpFetcher

__all__ = [
    "IDENTITY_PATHS",
    "IDENTITY_RETRY_S",
    "IDENTITY_TIMEOUT_S",
    "MODELS_IN_METRICS",
    "default_metrics_path",
    "engine_from_identity",
    "identify",
]

IDENTITY_PATHS = (
    "/version", "/v1/models", "/v2", "/info", "/props", "/api/version", "/server_info",
)
IDENTITY_TIMEOUT_S = 2.0
"""Cap of each identity GET (and never more than the target's scrape timeout). Identity
runs beside a scrape, so it costs no extra time up to the scrape's own timeout; at 1 s a
loaded box timed out an unhinted Ollama's /api/ps and the target read HTTP 404 for 30 s."""
IDENTITY_RETRY_S = 30.0
"""After a failed scrape, identity is probed alongside scrapes at most this often."""
MODELS_IN_METRICS = frozenset({"vllm", "sglang", "triton", "lmdeploy", "ollama", "dcgm"})
"""Engines whose metrics name their models (labels, ``/api/ps``; DCGM has none): identity
adds only versions and limits, so with ``defer_identity`` it may follow the first sample."""

_OWNED_BY = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "tensorrt_llm": "trtllm",
    "lmdeploy": "lmdeploy",
}
_SGLANG_KEYS = (
    "version", "model_path", "served_model_name", "tp_size", "dp_size", "pp_size",
    "max_running_requests", "max_total_num_tokens", "context_length", "page_size",
    "chunked_prefill_size", "enable_metrics", "enable_mfu_metrics",
)
_TGI_KEYS = (
    "model_id", "model_sha", "model_dtype", "max_concurrent_requests", "max_input_tokens",
    "max_input_length", "max_total_tokens", "max_batch_total_tokens", "max_batch_size", "router",
    "version", "sha", "docker_label",
)
_TGI_FLAT = ("model_id", "model_sha", "max_concurrent_requests", "max_input_tokens",
             "max_total_tokens", "max_batch_size")
"""TGI ``/info`` fields also kept at the top level, where ``parse.tgi`` reads them."""
_LLAMACPP_KEYS = (
    "total_slots", "model_path", "build_info", "endpoint_metrics", "endpoint_slots", "n_ctx",
)
_LLAMACPP_FLAT = ("total_slots", "build_info", "n_ctx")
"""``/props`` fields also kept at the top level, where ``parse.llamacpp`` reads them (not
``model_path``: ``/v1/models`` names the model as the server was told to, a path does not)."""


def default_metrics_path(engine: str | None, identity: dict[str, Any] | None = None) -> str:
    """The metrics path for ``engine`` (``identity`` tells whether trtllm's Prometheus works)."""
    if engine == "ollama":
        return "/api/ps"
    if engine == "trtllm" and identity and identity.get("prometheus_metrics"):
        return "/prometheus/metrics"
    return "/metrics"


def engine_from_identity(ident: dict[str, Any] | None) -> str | None:
    """The engine id the identity endpoints make certain, or None."""
    if not ident:
        return None
    tri = ident.get("triton")
    if isinstance(tri, dict) and str(tri.get("name", "")).lower() == "triton":
        return "triton"
    ob = ident.get("owned_by")
    if isinstance(ob, str) and ob.lower() in _OWNED_BY:
        return _OWNED_BY[ob.lower()]
    tgi = ident.get("tgi")
    if isinstance(tgi, dict) and tgi.get("router") == "text-generation-router":
        return "tgi"
    if "ollama" in ident:
        return "ollama"
    if "llamacpp" in ident:
        return "llamacpp"
    return None


def _keep(ident: dict[str, Any], name: str, sub: dict[str, Any], flat: Iterable[str]) -> None:
    """Store an endpoint's fields under ``name``, and copy ``flat`` ones to the top level,
    where the adapters read them (``total_slots``, ``model_id``...)."""
    ident[name] = sub
    for k in flat:
        if k in sub:
            ident.setdefault(k, sub[k])


async def identify(http: HttpFetcher, target: Target) -> dict[str, Any]:
    """Ask the identity endpoints in parallel; returns what answered (never raises).

    Keys (each only when answered): ``version``, ``owned_by``, ``models``,
    ``max_model_len``, ``triton`` {name, version, extensions}, ``tgi`` {model_id,
    version, router, ...} (and its ``_TGI_FLAT`` fields at the top level), ``llamacpp``
    {total_slots, build_info, endpoint_metrics, ...} (and ``_LLAMACPP_FLAT`` likewise),
    ``ollama`` {version}, ``sglang`` {version, model_path, tp_size, ...},
    ``prometheus_metrics`` (trtllm: ``/prometheus/metrics`` answered 200), ``engine``
    (when the answers make it certain) and always ``host``.
    """
    ident: dict[str, Any] = {"host": target.host}
    if target.engine == "dcgm":
        return ident
    timeout = min(IDENTITY_TIMEOUT_S, target.timeout_s)
    try:
        answers = await asyncio.gather(
            *(http.get_json(target, p, timeout) for p in IDENTITY_PATHS)
        )
    except asyncio.CancelledError:
        raise
    except Exception:  # pragma: no cover - _get_json never raises
        return ident
    pairs = zip(IDENTITY_PATHS, answers, strict=True)
    got = {p: body for p, (code, body) in pairs if code == 200}
    versions: list[str] = []

    v = got.get("/version")
    if isinstance(v, dict) and isinstance(v.get("version"), (str, int, float)):
        versions.append(str(v["version"]))
    models = got.get("/v1/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        data = [d for d in models["data"] if isinstance(d, dict)]
        ids = [str(d["id"]) for d in data if "id" in d]
        if ids:
            ident["models"] = ids
        owners = [d.get("owned_by") for d in data if isinstance(d.get("owned_by"), str)]
        if owners:
            ident["owned_by"] = owners[0]
        mml = [d.get("max_model_len") for d in data if isinstance(d.get("max_model_len"), int)]
        if mml:
            ident["max_model_len"] = mml[0]
    s = got.get("/server_info")
    if isinstance(s, dict) and ("version" in s or "model_path" in s):
        sub = {k: s[k] for k in _SGLANG_KEYS if isinstance(s.get(k), (str, int, float, bool))}
        if sub:
            ident["sglang"] = sub
            if isinstance(sub.get("version"), str):
                versions.append(sub["version"])
    info = got.get("/info")
    if isinstance(info, dict) and ("model_id" in info or "router" in info):
        sub = {k: info[k] for k in _TGI_KEYS if isinstance(info.get(k), (str, int, float))}
        _keep(ident, "tgi", sub, _TGI_FLAT)
        if isinstance(sub.get("version"), str):
            versions.append(sub["version"])
    tri = got.get("/v2")
    if isinstance(tri, dict) and isinstance(tri.get("name"), str):
        ident["triton"] = {
            "name": tri["name"],
            "version": str(tri.get("version")) if tri.get("version") is not None else None,
            "extensions": [str(x) for x in tri.get("extensions", []) if isinstance(x, str)]
            if isinstance(tri.get("extensions"), list)
            else [],
        }
        if ident["triton"]["version"]:
            versions.append(ident["triton"]["version"])
    ov = got.get("/api/version")
    if isinstance(ov, dict) and isinstance(ov.get("version"), str):
        ident["ollama"] = {"version": ov["version"]}
        versions.append(ov["version"])
    props = got.get("/props")
    if isinstance(props, dict) and ("total_slots" in props or "build_info" in props):
        sub = {
            k: props[k]
            for k in _LLAMACPP_KEYS
            if isinstance(props.get(k), (str, int, float, bool))
        }
        _keep(ident, "llamacpp", sub, _LLAMACPP_FLAT)
        if isinstance(sub.get("build_info"), str):
            versions.append(sub["build_info"])
    if versions:
        ident["version"] = versions[0]
    engine = target.engine or engine_from_identity(ident)
    if engine == "trtllm":
        code = await http.status_of(target, "/prometheus/metrics", timeout)
        ident["prometheus_metrics"] = code == 200
    found = engine_from_identity(ident)
    if found:
        ident["engine"] = found
    return ident
