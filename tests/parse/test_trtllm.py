"""trtllm-serve adapter: /metrics JSON iteration stats and /prometheus/metrics text."""

from __future__ import annotations

import math

import pytest

from llmtop.model import Hist
from llmtop.parse import trtllm
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text


def _body(name: str) -> str:
    """Fixture body without our '#' header lines (and the docs' '...' placeholder lines)."""
    lines = fixture_text(name).splitlines()
    return "\n".join(x for x in lines if not x.startswith("#") and x.strip() != "...")


def test_docs_json_example():
    # The docs elide inflightBatchingStats/kvCacheStats with "...": read what is left.
    s = trtllm.normalize(_body("trtllm-serve-docs-metrics-json.txt"), identity={"model": "m"})
    assert s.engine == "trtllm"
    (m,) = s.models
    assert m.model == "m"
    assert m.gauges == {}  # no numActiveRequests / numQueuedRequests / kvCacheStats values
    assert m.counters == {}
    assert m.hists == {}
    assert s.extra["iterations"] == 1
    assert s.extra["gpuMemUsage"] == 56401920000
    assert s.extra["iter"] == 1
    assert s.extra["iterLatencyMS"] == 16.505143404006958
    assert s.extra["newActiveRequestsQueueLatencyMS"] == 0.0007503032684326172
    assert "kv_cache" in s.extra and s.extra["kv_cache"] == {}
    assert s.start_time is None


def test_docs_json_verbatim_is_not_json():
    with pytest.raises(ParseError):
        trtllm.normalize(
            "\n".join(
                x
                for x in fixture_text("trtllm-serve-docs-metrics-json.txt").splitlines()
                if not x.startswith("#")
            )
        )


def test_full_json_uses_newest_iteration():
    s = trtllm.normalize(_body("trtllm-serve-SYNTHETIC-metrics-full.json"))
    (m,) = s.models
    assert m.model == "default"
    assert m.gauges == {
        "running": 6.0,
        "waiting": 2.0,
        "max_running": 64.0,
        "kv_usage": pytest.approx(240 / 6239),
        "kv_capacity_tokens": 6239.0 * 32,
        "prefix_hit_rate_gauge": 0.2,
    }
    assert m.counters == {"prefix_hits": 76.0 * 32, "prefix_queries": (76.0 + 301.0) * 32}
    assert "requests" not in m.counters
    assert s.extra["iterations"] == 2
    assert s.extra["iter"] == 42
    assert s.extra["gpuMemUsage"] == 56401920000
    assert s.extra["cpuMemUsage"] == 1234567
    assert s.extra["pinnedMemUsage"] == 0
    assert s.extra["timestamp"] == "11-22-2026 13:30:01"
    assert s.extra["inflightBatchingStats"]["numGenRequests"] == 6
    assert s.extra["kv_cache"]["allocTotalBlocks"] == 421


def test_empty_json_list_means_no_new_iterations():
    s = trtllm.normalize("[]", identity={"model_id": "llama"})
    (m,) = s.models
    assert m.model == "llama"
    assert m.gauges == {}  # idle: nothing reported, not zeros
    assert m.counters == {}
    assert s.extra == {"iterations": 0}


def test_prometheus_text():
    s = trtllm.normalize(
        fixture_text("trtllm-prometheus-SYNTHETIC-from-collector-py.txt"),
        identity={"model_id": "TinyLlama", "version": "1.2.0"},
    )
    assert s.version == "1.2.0"
    (m,) = s.models
    assert m.model == "TinyLlama"  # model_name="undefined" replaced by identity
    assert m.gauges == {
        "running": 6.0,
        "waiting": 2.0,
        "kv_usage": 0.0385,
        "prefix_hit_rate_gauge": 0.2,
        "kv_capacity_tokens": 6239.0 * 32,
    }
    assert m.counters == {
        "requests": 42.0,
        "errors": 1.0,
        "prompt_tokens": 21000.0,
        "generation_tokens": 5376.0,
        "prefix_hits": 128.0 * 32,
        "prefix_queries": (128.0 + 512.0) * 32,
    }
    assert m.counters_by == {"finished": {"stop": 40.0, "length": 2.0}}
    assert m.hists["e2e"] == Hist((0.3, 1.0, math.inf), (0.0, 30.0, 42.0), 33.6, 42.0)
    assert m.hists["ttft"] == Hist((0.001, 0.1, math.inf), (0.0, 35.0, 42.0), 2.94, 42.0)
    assert m.hists["tpot"] == Hist((0.01, math.inf), (40.0, 42.0), 0.336, 42.0)
    assert m.hists["queue"] == Hist((0.3, math.inf), (41.0, 42.0), 0.84, 42.0)
    assert "itl" not in m.hists
    assert s.extra["gpu_memory_usage_bytes"] == {"TinyLlama": 5.640192e10}
    assert s.extra["num_requests_completed"] == {"TinyLlama": 42.0}


def test_prometheus_phases_max_running_and_spec_counters():
    s = trtllm.normalize(fixture_text("trtllm-prometheus-generated-phases-spec.txt"))
    (m,) = s.models
    assert m.model == "default"  # model_name="undefined", no identity
    assert m.gauges == {"running": 5.0, "waiting": 2.0, "max_running": 64.0}
    assert m.counters["spec_draft_tokens"] == 2400.0
    assert m.counters["spec_accepted_tokens"] == 1740.0
    assert "spec_drafts" not in m.counters  # TRT-LLM counts no draft rounds
    assert "spec_accept_rate_gauge" not in m.gauges  # acceptance_length is not a rate
    pre, dec, inf = m.hists["prefill"], m.hists["decode"], m.hists["inference"]
    assert (pre.count, pre.sum) == (8.0, 0.8700000000000001)
    assert pre.bounds[:5] == (0.001, 0.005, 0.01, 0.025, 0.05)
    assert pre.cumulative[:6] == (0.0, 0.0, 0.0, 1.0, 4.0, 6.0)
    assert (dec.count, dec.sum) == (8.0, 27.6) and dec.cumulative[:4] == (0.0, 0.0, 1.0, 2.0)
    assert (inf.count, inf.sum) == (8.0, 28.47)
    assert set(m.hists) == {"e2e", "ttft", "tpot", "queue", "prefill", "decode", "inference"}


def test_prometheus_without_phases_has_none():
    text = fixture_text("trtllm-prometheus-SYNTHETIC-from-collector-py.txt")
    (m,) = trtllm.normalize(text).models
    assert not {"prefill", "decode", "inference"} & set(m.hists)
    assert "max_running" not in m.gauges and "spec_draft_tokens" not in m.counters


BARE = """# HAND-MADE: TRT-LLM 1.1.0rc5-style bare names (Dynamo docs), a NaN gauge, cached tokens
# TYPE request_success_total counter
request_success_total{model_name="Qwen3-0.6B",engine_type="trtllm",finished_reason="stop"} 7
# TYPE num_requests_running gauge
num_requests_running{model_name="Qwen3-0.6B",engine_type="trtllm"} NaN
# TYPE trtllm:prompt_tokens_total counter
trtllm:prompt_tokens_total{model_name="Qwen3-0.6B",engine_type="trtllm"} 1000
# TYPE trtllm:prompt_cached_tokens_total counter
trtllm:prompt_cached_tokens_total{model_name="Qwen3-0.6B",engine_type="trtllm"} 250
# TYPE time_to_first_token_seconds histogram
time_to_first_token_seconds_bucket{model_name="Qwen3-0.6B",engine_type="trtllm",le="0.1"} 6
time_to_first_token_seconds_bucket{model_name="Qwen3-0.6B",engine_type="trtllm",le="+Inf"} 7
time_to_first_token_seconds_sum{model_name="Qwen3-0.6B",engine_type="trtllm"} 0.5
time_to_first_token_seconds_count{model_name="Qwen3-0.6B",engine_type="trtllm"} 7
"""


def test_bare_and_colon_names():
    s = trtllm.normalize(BARE)
    (m,) = s.models
    assert m.model == "Qwen3-0.6B"
    assert m.gauges == {}  # NaN running is absent
    assert m.counters == {
        "requests": 7.0,
        "prompt_tokens": 1000.0,
        "prefix_hits": 250.0,
        "prefix_queries": 1000.0,
    }
    assert m.counters_by == {"finished": {"stop": 7.0}}
    assert m.hists["ttft"].count == 7.0
    assert "e2e" not in m.hists


@pytest.mark.parametrize(
    "body",
    [
        "",
        "<html></html>",
        "{not json",
        '"a string"',
        "[1, 2]",
        '[{"foo": 1}]',
        "vllm:num_requests_running 3\n",
    ],
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        trtllm.normalize(body)

