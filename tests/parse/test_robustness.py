"""Every adapter, on every prefix of its fixtures and on mangled copies, either parses or
raises ParseError: bad input is a BAD PAYLOAD state, never an exception."""

from __future__ import annotations

import importlib

import pytest

from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text

CASES = [
    ("vllm", "vllm-real-cpu-v0.32.0-under-load.txt"),
    ("vllm", "vllm-generated-v0.33.0-loggers.txt"),
    ("sglang", "sglang-generated-v0.5.23-metrics_collector.txt"),
    ("lmdeploy", "lmdeploy-SYNTHETIC-from-loggers-py.txt"),
    ("dcgm", "dcgm-exporter-readme.txt"),
    ("dcgm", "dcgm-HANDMADE-edge-mig-k8s.txt"),
    ("llamacpp", "llamacpp-SYNTHETIC-from-server-context-cpp.txt"),
    ("ollama", "ollama-docs-api-ps.txt"),
    ("tgi", "tgi-SYNTHETIC-from-server-rs.txt"),
    ("triton", "triton-docs-user_guide-metrics.txt"),
    ("triton", "triton-trtllm_backend-readme.txt"),
    ("triton", "triton-capture-2gpu-ensemble-excerpt.txt"),
    ("triton", "triton-HANDMADE-edge.txt"),
    ("triton", "triton-vllm_backend-readme.txt"),
    ("trtllm", "trtllm-prometheus-SYNTHETIC-from-collector-py.txt"),
    ("trtllm", "trtllm-serve-SYNTHETIC-metrics-full.json"),
]


@pytest.mark.parametrize(("engine", "name"), CASES)
def test_truncated_or_mangled_never_crashes(engine, name):
    """Any prefix of a fixture, or one with bytes replaced, parses or raises ParseError."""
    normalize = importlib.import_module(f"llmtop.parse.{engine}").normalize
    lines = fixture_text(name).splitlines()
    json_body = name.endswith(".json") or engine == "ollama"
    # our provenance lines start with '#'; in JSON fixtures every '#' line is ours
    text = "\n".join(x for x in lines
                     if not (x.startswith("#") if json_body else x.startswith("# source")))
    step = max(1, len(text) // 150)
    bodies = [text[:cut] for cut in range(0, len(text), step)]
    bodies += [text[:i] + '\x00{"' + text[i + 1 :] for i in range(0, len(text), step * 7)]
    for body in bodies:
        try:
            normalize(body, identity={"host": "h"})
        except ParseError:
            pass
