"""Was the bake-off fair? What each engine said about itself, and the checks on the results.

- ``engine_info``: what the engine reports about its settings: ``GET /version`` (vLLM, TGI),
  ``GET /v1/models`` (model, ``max_model_len``), SGLang ``GET /server_info`` (or the older
  ``/get_server_info``: batch, memory fraction, context, KV tokens). Missing is ``None``.
- ``short_fraction``: the share of measured requests that ended before their max tokens.
  More than ``SHORT_LIMIT`` and the engine's throughput is not comparable (it did less work).
- ``fairness_warnings``: sentences for the report: short outputs, an engine that did not take
  ``ignore_eos``, engines on different APIs, models, contexts or request lists.
"""

from __future__ import annotations

from typing import Any

import httpx

from llmtop.loadgen.options import split_url

__all__ = ["SGLANG_KEYS", "SHORT_LIMIT", "engine_info", "fairness_warnings", "short_fraction"]

SHORT_LIMIT = 0.05
"""An engine that ended more than this share of its requests early is flagged."""
SGLANG_KEYS = ("version", "model_path", "served_model_name", "context_length",
               "max_running_requests", "max_total_num_tokens", "mem_fraction_static",
               "chunked_prefill_size", "max_prefill_tokens", "tp_size", "dp_size", "dtype",
               "kv_cache_dtype", "schedule_policy", "quantization", "attention_backend")
"""The settings kept from SGLang's /server_info (the rest is left out of the report)."""


def _get_json(client: httpx.Client, url: str, headers: dict[str, str]) -> Any:
    try:
        r = client.get(url, headers=headers)
        if r.status_code != 200:
            return None
        return r.json()
    except (httpx.HTTPError, ValueError):
        return None


def engine_info(url: str, *, api_key: str | None = None, insecure: bool = False,
                timeout_s: float = 5.0) -> dict[str, Any]:
    """What the engine says about itself; every field ``None`` when not reported."""
    base, _host, _ep = split_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    info: dict[str, Any] = {"version": None, "model": None, "max_model_len": None,
                            "server_info": None}
    with httpx.Client(timeout=timeout_s, verify=not insecure, trust_env=False) as c:
        v = _get_json(c, base + "/version", headers)
        if isinstance(v, dict) and isinstance(v.get("version"), str):
            info["version"] = v["version"]
        m = _get_json(c, base + "/v1/models", headers)
        data = m.get("data") if isinstance(m, dict) else None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            info["model"] = data[0].get("id")
            mml = data[0].get("max_model_len")
            info["max_model_len"] = mml if isinstance(mml, int) else None
        si = _get_json(c, base + "/server_info", headers)
        if not isinstance(si, dict):
            si = _get_json(c, base + "/get_server_info", headers)
        if isinstance(si, dict):
            info["server_info"] = {k: si[k] for k in SGLANG_KEYS if k in si}
            if info["version"] is None and isinstance(si.get("version"), str):
                info["version"] = si["version"]
            if info["max_model_len"] is None and isinstance(si.get("context_length"), int):
                info["max_model_len"] = si["context_length"]
    return info


def short_fraction(report: dict[str, Any] | None) -> float | None:
    """Share of measured requests that ended before their max tokens (None: none measured)."""
    so = (report or {}).get("short_outputs") or {}
    n = so.get("requests") or 0
    return so.get("short", 0) / n if n else None


def fairness_warnings(endpoints: list[dict[str, Any]]) -> list[str]:
    """Sentences about anything that makes the engines' numbers not comparable."""
    out: list[str] = []
    ran = [e for e in endpoints if e.get("error") is None and e.get("steps")]
    for e in ran:
        f = e.get("short_outputs")
        if f is not None and f > SHORT_LIMIT:
            out.append(f"{e['name']} ended {100 * f:.0f} % of its requests before their max "
                       "tokens: it generated less, so its throughput is not comparable.")
        if e.get("ignore_eos") is False:
            out.append(f"{e['name']} refused ignore_eos: its output lengths are not forced, "
                       "check short outputs before comparing.")
    for key, what in (("endpoint", "APIs"), ("model", "model names"),
                      ("request_list_sha256", "request lists")):
        vals = {e.get(key) for e in ran if e.get(key) is not None}
        if len(vals) > 1:
            names = ", ".join(f"{e['name']}: {str(e.get(key))[:16]}" for e in ran)
            out.append(f"The engines ran different {what} ({names}).")
    def served_ctx(e: dict[str, Any]) -> Any:
        return (e.get("settings") or {}).get("max_model_len")

    if len({served_ctx(e) for e in ran if served_ctx(e)}) > 1:
        out.append("The engines were set up with different context lengths ("
                   + ", ".join(f"{e['name']}: {served_ctx(e) or '?'}" for e in ran)
                   + "); every engine got the lengths fitted to the first one's context.")
    for e in endpoints:
        if e.get("error"):
            out.append(f"{e['name']}: {e['error']}")
    return out
