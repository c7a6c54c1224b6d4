"""Triton adapter: core nv_inference_*, TensorRT-LLM backend, vLLM backend, nv_gpu_*."""

from __future__ import annotations

import math

import pytest

from llmtop.model import Hist
from llmtop.parse import triton
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text


def _one(name: str, **kw):
    s = triton.normalize(fixture_text(name), **kw)
    assert s.engine == "triton"
    assert s.start_time is None  # Triton exposes no process start
    return s


def test_docs_fixture_ttft_without_bucket_suffix():
    s = _one("triton-docs-user_guide-metrics.txt")
    (m,) = s.models
    assert m.model == "my_model"
    assert m.info == {"version": "1"}
    # The documented block names buckets without _bucket: still read as TTFT, ms -> s.
    assert m.hists["ttft"] == Hist(
        bounds=(0.1, 0.5, 2.0, 5.0, math.inf),
        cumulative=(8.0, 30.0, 36.0, 37.0, 37.0),
        sum=pytest.approx(10.771),
        count=37.0,
    )
    assert m.counters == {"requests": 161.0}
    assert m.counters_by == {"finished": {"success": 161.0}}
    assert m.hists["queue"] == Hist((), (), pytest.approx(0.01111), 161.0)
    assert "e2e" not in m.hists  # no nv_inference_request_duration_us in this block
    assert m.gauges == {}
    q = s.extra["triton_models"]["my_model"]["quantiles_s"]["queue"]
    assert q["0.5"] == pytest.approx(55e-6)
    assert q["0.999"] == pytest.approx(101e-6)
    assert s.gpus == []


def test_trtllm_backend_readme():
    s = _one("triton-trtllm_backend-readme.txt")
    (m,) = s.models
    assert m.model == "tensorrt_llm"
    assert m.info["version"] == "1"
    assert m.gauges == {
        "running": 0.0,  # request_type="active"
        "max_running": 512.0,
        "waiting": 1.0,  # request_type="waiting" 1 + nv_inference_pending_request_count 0
        "kv_usage": 0.4875,  # kv_cache_block_type="fraction"
        "kv_capacity_tokens": 6239.0 * 64,
    }
    assert m.counters == {
        "errors": 0.0,
        "requests": 0.0,
    }
    assert m.counters_by == {"finished": {"success": 0.0, "error": 0.0}}
    assert "prefix_hits" not in m.counters  # no "reused" block type in this README sample
    assert "prompt_tokens" not in m.counters  # no nv_llm_input_token_len
    assert m.hists["e2e"] == Hist((), (), 0.0, 0.0)
    assert m.hists["queue"] == Hist((), (), 0.0, 0.0)
    assert "ttft" not in m.hists
    trt = s.extra["triton_models"]["tensorrt_llm"]["trt_llm"]
    assert trt["memory_bytes_gpu"] == 1610236.0
    assert trt["kv_blocks_free"] == 6239.0
    assert trt["kv_blocks_used"] == 1.0
    assert trt["requests_scheduled"] == 1.0
    assert trt["requests_context"] == 1.0
    assert trt["timestamp"] == 1700074049.0
    assert trt["iteration_counter"] == 0.0
    assert trt["v1_total_generation_tokens"] == 20.0
    assert trt["v1_total_context_tokens"] == 5.0
    assert trt["ifb_generation_requests"] == 0.0
    core = s.extra["triton_models"]["tensorrt_llm"]
    assert core["exec_count"] == 0.0
    assert core["compute_infer_s"] == 0.0


def test_vllm_backend_readme():
    s = _one("triton-vllm_backend-readme.txt")
    (m,) = s.models
    assert m.model == "vllm_model"
    assert m.info["version"] == "1"
    assert m.counters["prompt_tokens"] == 10.0
    assert m.counters["generation_tokens"] == 16.0
    assert m.hists["ttft"].count == 1.0
    assert m.hists["ttft"].sum == pytest.approx(0.03233122825622559)
    assert m.hists["ttft"].cumulative[-1] == 1.0
    assert m.hists["e2e"].sum == pytest.approx(0.08686184883117676)
    assert m.hists["e2e"].count == 1.0
    assert m.hists["prompt_len"].sum == 10.0
    assert m.hists["gen_len"].sum == 16.0
    tpot_like = m.hists.get("itl") or m.hists.get("tpot")
    assert tpot_like is not None
    assert tpot_like.count == 15.0
    assert tpot_like.sum == pytest.approx(0.04501533508300781)
    assert "running" not in m.gauges
    assert "requests" not in m.counters


def test_real_capture_models_and_gpus():
    s = _one("triton-capture-2gpu-ensemble-excerpt.txt", identity={"host": "10.0.0.7"})
    by = {m.model: m for m in s.models}
    assert sorted(by) == [
        "distilgpt2_cola",
        "gpt_neo_cola_ensemble",
        "gpt_neo_cola_part0",
        "gpt_neo_cola_part1",
        "gpt_neo_cola_part2",
        "gpt_neo_cola_part3",
    ]
    d = by["distilgpt2_cola"]  # 4 series (one per gpu_uuid) summed
    assert d.counters["requests"] == 604.0
    assert d.counters["errors"] == 0.0
    assert d.hists["e2e"] == Hist(
        (), (), pytest.approx((47574974 + 50371315 + 47312693 + 47603188) * 1e-6), 604.0
    )
    assert d.hists["queue"].sum == pytest.approx((2550 + 58356 + 2496 + 2554) * 1e-6)
    assert d.info["version"] == "0"
    e = by["gpt_neo_cola_ensemble"]
    assert e.info["version"] == "1"
    assert e.hists["e2e"].sum == pytest.approx(389.818096)
    assert "waiting" not in e.gauges  # no pending_request_count in this old build
    assert s.extra["triton_models"]["distilgpt2_cola"]["exec_count"] == 604.0
    assert s.extra["triton_models"]["gpt_neo_cola_part0"]["compute_infer_s"] == pytest.approx(
        84.61118
    )
    assert [g.uuid for g in s.gpus] == [
        "GPU-71ce41fd-3ac0-afe7-c995-21119f1e984a",
        "GPU-8674351b-fff7-56c3-f545-26313154b8ed",
        "GPU-4bb61721-0ae2-9004-636f-e73bab9ef8e0",
        "GPU-7a9c9f44-ff57-1177-e21a-1740a8cf1a65",
    ]
    g = s.gpus[0]
    assert (g.host, g.index, g.source) == ("10.0.0.7", 0, "triton")
    assert g.util == 0.0
    assert g.mem_total_bytes == 16944988160
    assert g.mem_used_bytes == 7451181056
    assert g.power_w == 58.954
    assert g.power_limit_w == 300.0
    assert g.energy_j == 205620.582
    assert g.temp_c is None
    assert g.mem_free_bytes is None
    assert [x.index for x in s.gpus] == [0, 1, 2, 3]
    assert s.gpus[3].energy_j == 199292.13


EDGE = fixture_text("triton-HANDMADE-edge.txt")


def test_edge_failures_versions_nan_kv_from_used_max():
    s = triton.normalize(EDGE)
    (m,) = s.models
    assert m.info["version"] == "1,2"
    assert m.counters_by["finished"]["success"] == 100.0
    assert m.counters["errors"] == 6.0
    assert m.counters_by["finished"]["error"] == 6.0
    assert m.counters["requests"] == 106.0
    assert m.counters_by["error"] == {"REJECTED": 3.0, "CANCELED": 2.0, "BACKEND": 1.0,
                                      "OTHER": 0.0}
    assert m.counters["rejected"] == 3.0
    assert m.counters["aborted"] == 2.0
    # the duration counters count successes only (real 2.51 server): the mean is over 100
    assert m.hists["e2e"] == Hist((), (), pytest.approx(2.12), 100.0)
    assert "queue" not in m.hists
    assert m.gauges["waiting"] == 4.0  # the NaN series is skipped, not counted as 0
    assert m.gauges["kv_usage"] == 0.25  # used/max without a "fraction" series
    assert m.gauges["kv_capacity_tokens"] == 3200.0
    assert "running" not in m.gauges
    assert m.counters["prefix_hits"] == 7 * 32.0
    assert "prefix_queries" not in m.counters
    assert m.counters["prompt_tokens"] == 250.0
    assert m.counters["generation_tokens"] == 600.0
    assert m.hists["prompt_len"].bounds == (10.0, math.inf)
    assert m.hists["gen_len"].cumulative == (0.0, 3.0)
    assert [g.uuid for g in s.gpus] == ["GPU-x", "GPU-y"]
    assert s.gpus[0].util is None  # NaN
    assert s.gpus[1].util == 0.5
    assert s.gpus[0].host == ""


def test_counter_reset_pair_reports_raw_values():
    """A restart makes counters go down: the adapter reports raw values; history detects it."""
    before = triton.normalize(EDGE).models[0]
    after_text = EDGE.replace('version="1"} 90', 'version="1"} 2').replace("2120000", "15000")
    after = triton.normalize(after_text).models[0]
    assert before.counters_by["finished"]["success"] == 100.0
    assert after.counters_by["finished"]["success"] == 12.0
    assert after.hists["e2e"].sum == pytest.approx(0.015)
    assert after.counters["requests"] < before.counters["requests"]


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html><head><title>502</title></head></html>",
        "vllm_but_not { broken",
        "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 3\n",
    ],
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        triton.normalize(body)


def test_help_type_only_payload_is_triton_without_models():
    body = (
        "# HELP nv_inference_request_success Number of successful inference requests\n"
        "# TYPE nv_inference_request_success counter\n"
    )
    s = triton.normalize(body)
    assert s.models == []
    assert s.gpus == []


REAL_SHAPE = """# HAND-MADE: the real server shape (_bucket suffix) beside vLLM-backend series
# TYPE nv_inference_first_response_histogram_ms histogram
nv_inference_first_response_histogram_ms_count{model="vllm_model",version="1"} 4
nv_inference_first_response_histogram_ms_sum{model="vllm_model",version="1"} 900
nv_inference_first_response_histogram_ms_bucket{model="vllm_model",version="1",le="100"} 1
nv_inference_first_response_histogram_ms_bucket{model="vllm_model",version="1",le="500"} 3
nv_inference_first_response_histogram_ms_bucket{model="vllm_model",version="1",le="+Inf"} 4
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="vllm_model",version="1"} 4
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="vllm_model",version="1"} 2000000
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model="vllm_model",version="1",le="0.5"} 3
vllm:time_to_first_token_seconds_bucket{model="vllm_model",version="1",le="+Inf"} 4
vllm:time_to_first_token_seconds_sum{model="vllm_model",version="1"} 0.85
vllm:time_to_first_token_seconds_count{model="vllm_model",version="1"} 4
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{model="vllm_model",version="1",le="1"} 2
vllm:e2e_request_latency_seconds_bucket{model="vllm_model",version="1",le="+Inf"} 4
vllm:e2e_request_latency_seconds_sum{model="vllm_model",version="1"} 1.9
vllm:e2e_request_latency_seconds_count{model="vllm_model",version="1"} 4
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model="vllm_model",version="1"} 64
"""


def _check_real_shape(m):
    # Triton's TTFT histogram has more buckets than the backend's here; for e2e the vLLM
    # histogram beats Triton's mean-only µs counter.
    assert m.hists["ttft"] == Hist((0.1, 0.5, math.inf), (1.0, 3.0, 4.0), 0.9, 4.0)
    assert m.hists["e2e"] == Hist((1.0, math.inf), (2.0, 4.0), 1.9, 4.0)
    assert m.counters["requests"] == 4.0
    assert m.counters["generation_tokens"] == 64.0
    assert m.info["version"] == "1"


def test_real_shape_with_vllm_backend():
    (m,) = triton.normalize(REAL_SHAPE).models
    _check_real_shape(m)


def test_vllm_backend_fallback_without_vllm_adapter(monkeypatch):
    import llmtop.parse.vllm as vllm_mod

    monkeypatch.delattr(vllm_mod, "normalize_families", raising=False)
    (m,) = triton.normalize(REAL_SHAPE).models
    _check_real_shape(m)
    vm = triton.normalize(fixture_text("triton-vllm_backend-readme.txt")).models[0]
    assert vm.counters == {"prompt_tokens": 10.0, "generation_tokens": 16.0}
    assert vm.hists["itl"].count == 15.0
    assert vm.hists["prompt_len"].sum == 10.0


def test_cpu_and_pinned_memory_go_to_extra():
    body = (
        "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0.25\n"
        "# TYPE nv_cpu_memory_total_bytes gauge\nnv_cpu_memory_total_bytes 6.7e+10\n"
        "# TYPE nv_cpu_memory_used_bytes gauge\nnv_cpu_memory_used_bytes NaN\n"
        "# TYPE nv_pinned_memory_pool_total_bytes gauge\n"
        "nv_pinned_memory_pool_total_bytes 268435456\n"
    )
    s = triton.normalize(body)
    assert s.models == []
    assert s.extra["cpu"] == {
        "util": 0.25,
        "mem_total_bytes": 6.7e10,
        "pinned_total_bytes": 268435456.0,
    }


def _nv(text: str, name: str) -> float:
    """The value of the one sample line starting with ``name{`` (or ``name`` if it has one)."""
    head = name if "{" in name else name + "{"
    (line,) = [ln for ln in text.splitlines() if ln.startswith(head)]
    return float(line.rsplit(" ", 1)[1])


@pytest.mark.parametrize("name", ["triton-real-2.51.0-under-load.txt",
                                  "triton-real-2.51.0-summaries-under-load.txt"])
def test_real_2_51_under_load(name):
    """A real 2.51 server: the duration counters count successes only, so means are over them."""
    text = fixture_text(name)
    s = _one(name)
    (m,) = s.models
    ok = _nv(text, "nv_inference_request_success")
    failed = _nv(text, 'nv_inference_request_failure{model="sleepy",reason="BACKEND"')
    assert failed == 4.0 and ok >= 100
    assert m.counters["requests"] == ok + failed
    assert m.counters_by["error"]["BACKEND"] == failed == m.counters["errors"]
    assert m.gauges == {"waiting": 12.0}  # pending; no running gauge, no KV
    e2e_us = _nv(text, "nv_inference_request_duration_us")
    assert m.hists["e2e"] == Hist((), (), pytest.approx(e2e_us * 1e-6), ok)
    compute_us = sum(_nv(text, f"nv_inference_compute_{p}_duration_us")
                     for p in ("input", "infer", "output"))
    assert m.hists["inference"] == Hist((), (), pytest.approx(compute_us * 1e-6), ok)
    # 50 ms per batch: the mean compute time per request is at least the sleep
    assert m.hists["inference"].sum / ok >= 0.05
    assert s.gpus == []  # no nv_gpu_* without a GPU
    assert set(s.extra["cpu"]) >= {"util", "mem_total_bytes", "mem_used_bytes"}


def test_real_2_51_summaries_in_seconds_and_nan_at_idle():
    loaded = _one("triton-real-2.51.0-summaries-under-load.txt")
    q = loaded.extra["triton_models"]["sleepy"]["quantiles_s"]
    assert set(q) == {"e2e", "queue", "compute_input", "compute_infer", "compute_output"}
    assert q["e2e"]["0.5"] == pytest.approx(0.20245)
    assert set(q["e2e"]) == {"0.5", "0.9", "0.95", "0.99", "0.999"}
    idle = _one("triton-real-2.51.0-summaries-idle.txt")
    (m,) = idle.models
    # every quantile prints "Nan" at idle: none is read (never 0), the counters are 0
    assert "quantiles_s" not in idle.extra["triton_models"]["sleepy"]
    assert m.counters["requests"] == 0.0
    assert m.hists["e2e"] == Hist((), (), 0.0, 0.0)
    assert m.gauges == {"waiting": 0.0}
