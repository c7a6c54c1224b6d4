"""Ollama ``GET /api/ps`` JSON -> ``EngineSample`` (METRICS.md §11).

Ollama has no Prometheus endpoint. One ``ModelSample`` per loaded model, with ``info``:
``size`` and ``size_vram`` (bytes, as strings), ``vram_fraction`` (size_vram/size: 1 = fully on
the GPU), ``parameter_size``, ``quantization``, ``family``, ``format``, ``expires_at``,
``context_length``. No gauges or counters: running/waiting are not reported, so absent.
``extra["loaded_models"]`` lists the names. The version comes from identity (``/api/version``).
"""

from __future__ import annotations

import json
from typing import Any

from llmtop.model import EngineSample, ModelSample
from llmtop.parse.common import identity_version
from llmtop.parse.exposition import ParseError

__all__ = ["normalize"]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _model(entry: Any) -> ModelSample:
    if not isinstance(entry, dict):
        raise ParseError("/api/ps: model entry is not an object")
    name = entry.get("name") or entry.get("model")
    if not isinstance(name, str) or not name:
        raise ParseError("/api/ps: model without a name")
    info: dict[str, str] = {}
    size, vram = _num(entry.get("size")), _num(entry.get("size_vram"))
    if size is not None:
        info["size"] = str(int(size))
    if vram is not None:
        info["size_vram"] = str(int(vram))
    if size and vram is not None:
        info["vram_fraction"] = f"{vram / size:.4g}"
    raw_details = entry.get("details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    for src, key in (
        ("parameter_size", "parameter_size"),
        ("quantization_level", "quantization"),
        ("family", "family"),
        ("format", "format"),
    ):
        v = details.get(src)
        if isinstance(v, str) and v:
            info[key] = v
    for key in ("expires_at", "digest"):
        v = entry.get(key)
        if isinstance(v, str) and v:
            info[key] = v
    ctx = _num(entry.get("context_length"))
    if ctx is not None:
        info["context_length"] = str(int(ctx))
    return ModelSample(model=name, info=info)


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """``/api/ps`` JSON text -> ``EngineSample(engine="ollama")``; ParseError if not that shape."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise ParseError("not an Ollama /api/ps payload (JSON nested too deep)") from None
    except (ValueError, TypeError) as exc:
        raise ParseError(f"not JSON: {str(exc)[:100]}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise ParseError('not an Ollama /api/ps payload (no "models" list)')
    models = [_model(e) for e in data["models"]]
    return EngineSample(
        engine="ollama",
        version=identity_version(identity),
        models=models,
        extra={"loaded_models": [m.model for m in models]},
    )
