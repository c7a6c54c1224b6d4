"""``normalize(engine, body, ...)``: dispatch to ``llmtop.parse.<engine>``, imported lazily.

Every adapter module exposes ``normalize(body, *, headers=None, identity=None) ->
EngineSample`` and raises ``ParseError`` on a bad payload. An unknown engine id is a
``ParseError`` too (the store shows it as a bad payload rather than crashing).
"""

from __future__ import annotations

import importlib
from typing import Any

from llmtop.model import ENGINES, EngineSample
from llmtop.model.stack import ROUTERS
from llmtop.parse.exposition import ParseError

__all__ = ["ENGINE_MODULES", "ROUTER_MODULES", "normalize"]

ENGINE_MODULES: dict[str, str] = {e: f"llmtop.parse.{e}" for e in ENGINES}
"""Engine id -> adapter module (imported on first use)."""

ROUTER_MODULES: dict[str, str] = {
    "vllm-router": "llmtop.parse.vllm_router",
    "sglang-router": "llmtop.parse.sglang_router",
    "gie-epp": "llmtop.parse.epp_router",
    "llm-d-epp": "llmtop.parse.epp_router",
    "dynamo": "llmtop.parse.dynamo_router",
    "production-stack": "llmtop.parse.prodstack_router",
    "litellm": "llmtop.parse.litellm_router",
}
"""Router family id (``model.stack.ROUTERS``) -> adapter module, parsed like an engine."""
assert set(ROUTER_MODULES) == set(ROUTERS)
ENGINE_MODULES.update(ROUTER_MODULES)


def normalize(
    engine: str,
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """Normalize ``body`` with the adapter of ``engine``. Raises ``ParseError``."""
    modname = ENGINE_MODULES.get(engine)
    if modname is None:
        raise ParseError(f"unknown engine {engine!r}")
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:
        raise ParseError(f"no adapter for engine {engine!r}") from exc
    return mod.normalize(body, headers=headers, identity=identity)
