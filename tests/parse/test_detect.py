"""Engine detection from payloads (every fixture) and identity answers."""

from __future__ import annotations

import pytest

from llmtop.model import ENGINES
from llmtop.parse.detect import detect_engine
from tests.conftest import fixture_text


def body_of(name: str) -> str:
    text = fixture_text(name)
    if name.startswith(("ollama-", "trtllm-serve-docs")):  # JSON after a '#' comment header
        return "\n".join(ln for ln in text.split("\n") if not ln.startswith("#"))
    return text


@pytest.mark.parametrize(
    ("name", "engine"),
    [
        ("vllm-generated-v0.33.0-loggers.txt", "vllm"),
        ("vllm-docs-design-metrics.txt", "vllm"),
        ("vllm-docs-usage-metrics.txt", "vllm"),
        ("edge-vllm-v0-era.txt", "vllm"),
        ("edge-vllm-dp2.txt", "vllm"),
        ("sglang-generated-v0.5.23-metrics_collector.txt", "sglang"),
        ("sglang-docs-production_metrics.txt", "sglang"),
        ("edge-sglang-v0.3-name-label.txt", "sglang"),
        ("triton-trtllm_backend-readme.txt", "triton"),
        ("triton-docs-user_guide-metrics.txt", "triton"),
        ("trtllm-serve-docs-metrics-json.txt", "trtllm"),
        ("llamacpp-SYNTHETIC-from-server-context-cpp.txt", "llamacpp"),
        ("dcgm-exporter-readme.txt", "dcgm"),
        ("dcgm-exporter-readme-k8s.txt", "dcgm"),
        ("ollama-docs-api-ps.txt", "ollama"),
        ("lmdeploy-SYNTHETIC-from-loggers-py.txt", "lmdeploy"),
    ],
)
def test_fixture_payloads(name, engine):
    assert detect_engine(body_of(name)) == engine
    assert engine in ENGINES


def test_triton_vllm_backend_needs_nv_inference_too():
    text = fixture_text("triton-vllm_backend-readme.txt")
    assert detect_engine(text) == "vllm"  # the README block alone: only vllm:* names
    with_triton = text + 'nv_inference_request_success{model="vllm_model",version="1"} 1\n'
    assert detect_engine(with_triton) == "triton"
    # native vLLM (model_name labels) beside nv_* stays vLLM
    native = fixture_text("edge-vllm-dp2.txt") + 'nv_gpu_utilization{gpu_uuid="x"} 0.5\n'
    assert detect_engine(native) == "vllm"


def test_prefixes():
    assert detect_engine("# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n") == "tgi"
    assert detect_engine('trtllm_num_requests_running{model_name="undefined"} 1\n') == "trtllm"
    bare = 'request_success_total{engine_type="undefined",model_name="undefined"} 2.0\n'
    assert detect_engine(bare) == "trtllm"
    assert detect_engine('lmdeploy:num_requests_running{engine="0"} 1\n') == "lmdeploy"
    assert detect_engine('sglang_num_running_reqs{dp_rank="0"} 1\n') == "sglang"
    assert detect_engine("nv_gpu_utilization 0.1\n") == "triton"


def test_llamacpp_501_body():
    body = (
        '{"error":{"code":501,"message":"This server does not support metrics endpoint. '
        'Start it with `--metrics`","type":"not_supported_error"}}'
    )
    assert detect_engine(body, "application/json") == "llamacpp"


def test_unknown_payload_falls_back_to_identity():
    python_only = '# TYPE python_info gauge\npython_info{version="3.11"} 1.0\n'
    assert detect_engine(python_only) is None
    assert detect_engine(python_only, identity={"owned_by": "vllm", "version": "0.33.0"}) == "vllm"
    assert detect_engine("", identity={"owned_by": "tensorrt_llm"}) == "trtllm"
    assert detect_engine("", identity={"owned_by": "lmdeploy"}) == "lmdeploy"
    assert detect_engine("", identity={"triton": {"name": "triton", "version": "2.60"}}) == "triton"
    assert detect_engine("", identity={"name": "triton", "version": "2.60"}) == "triton"
    assert detect_engine("", identity={"tgi": {"router": "text-generation-router"}}) == "tgi"
    assert detect_engine("", identity={"router": "text-generation-router"}) == "tgi"
    models = {"v1_models": {"data": [{"id": "m", "owned_by": "sglang"}]}}
    assert detect_engine("", identity=models) == "sglang"
    assert detect_engine("", identity={"ollama": {"version": "0.5.1"}}) == "ollama"
    assert detect_engine("", identity={"llamacpp": {"total_slots": 4}}) == "llamacpp"


def test_payload_wins_over_identity_and_nothing_gives_none():
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    assert detect_engine(text, identity={"owned_by": "vllm"}) == "sglang"
    assert detect_engine("", None, None) is None
    assert detect_engine(None, identity={"host": "h", "version": "1"}) is None
    assert detect_engine("<html><body>login</body></html>") is None
