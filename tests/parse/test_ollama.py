"""Ollama adapter on the docs /api/ps example."""

from __future__ import annotations

import pytest

from llmtop.parse import ollama
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text


def _json(name: str) -> str:
    """The fixture's JSON body (the '#' header lines are ours, not Ollama's)."""
    return "\n".join(line for line in fixture_text(name).splitlines() if not line.startswith("#"))


def test_api_ps_docs_example():
    s = ollama.normalize(_json("ollama-docs-api-ps.txt"), identity={"version": "0.5.1"})
    assert s.engine == "ollama"
    assert s.version == "0.5.1"
    assert s.start_time is None
    (m,) = s.models
    assert m.model == "mistral:latest"
    assert m.info == {
        "size": "5137025024",
        "size_vram": "5137025024",
        "vram_fraction": "1",
        "parameter_size": "7.2B",
        "quantization": "Q4_0",
        "family": "llama",
        "format": "gguf",
        "expires_at": "2024-06-04T14:38:31.83753-07:00",
        "digest": "2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",
    }
    assert "context_length" not in m.info  # in the struct, not in the docs example
    assert m.gauges == {}  # running/waiting are not reported by Ollama
    assert m.counters == {}
    assert m.hists == {}
    assert s.extra == {"loaded_models": ["mistral:latest"]}
    assert s.gpus == []


def test_no_models_loaded():
    s = ollama.normalize('{"models": []}')
    assert s.models == []
    assert s.extra == {"loaded_models": []}
    assert s.version is None


def test_partial_offload_and_context_length():
    body = (
        '{"models":[{"name":"llama3:8b","model":"llama3:8b","size":8000,"size_vram":2000,'
        '"context_length":8192,"details":{}}]}'
    )
    m = ollama.normalize(body).models[0]
    assert m.info == {
        "size": "8000",
        "size_vram": "2000",
        "vram_fraction": "0.25",
        "context_length": "8192",
    }


@pytest.mark.parametrize(
    "body",
    [
        "",
        "Ollama is running",
        "<html></html>",
        "[]",
        '{"version": "0.5.1"}',
        '{"models": "x"}',
        '{"models": [42]}',
        '{"models": [{"size": 1}]}',
    ],
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        ollama.normalize(body)

