"""The adapter registry: lazy dispatch by engine id."""

from __future__ import annotations

import importlib

import pytest

from llmtop.model import ENGINES
from llmtop.model.stack import ROUTERS
from llmtop.parse import registry
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text


def test_engine_modules_cover_every_engine():
    # routers are parsed like engines (model.stack.ROUTERS, docs/stack.md)
    assert set(registry.ENGINE_MODULES) == set(ENGINES) | set(ROUTERS)
    assert registry.ENGINE_MODULES["vllm"] == "llmtop.parse.vllm"
    for module in set(registry.ROUTER_MODULES.values()):
        assert callable(importlib.import_module(module).normalize)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "lmdeploy"])
def test_own_adapters_expose_normalize(engine):
    mod = importlib.import_module(registry.ENGINE_MODULES[engine])
    assert callable(mod.normalize)


def test_dispatch_vllm_and_sglang():
    s = registry.normalize(
        "vllm", fixture_text("vllm-generated-v0.33.0-loggers.txt"), identity={"version": "0.33.0"}
    )
    assert s.engine == "vllm" and s.version == "0.33.0"
    assert s.models[0].gauges["running"] == 3.0
    s2 = registry.normalize(
        "sglang", fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    )
    assert s2.engine == "sglang" and s2.models[0].gauges["running"] == 3.0


def test_unknown_engine_is_a_parse_error():
    with pytest.raises(ParseError, match="unknown engine"):
        registry.normalize("nope", "x 1\n")


def test_bad_payload_propagates_parse_error():
    with pytest.raises(ParseError, match="empty body"):
        registry.normalize("vllm", "")
