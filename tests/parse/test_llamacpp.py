"""llama.cpp adapter on the synthetic fixtures (format from server-context.cpp/server-task.cpp)."""

from __future__ import annotations

import pytest

from llmtop.parse import llamacpp
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text

TEXT = fixture_text("llamacpp-SYNTHETIC-from-server-context-cpp.txt")
NEW = fixture_text("llamacpp-SYNTHETIC-from-server-task-cpp-cached-spec.txt")


def test_fixture_fields():
    s = llamacpp.normalize(
        TEXT,
        headers={"Process-Start-Time-Unix": "1763800000"},
        identity={"model_path": "/models/qwen2.5-0.5b-q4_k_m.gguf", "total_slots": 4},
    )
    assert s.engine == "llamacpp"
    # the header is llama-server's monotonic start mark, not a unix time: no start_time
    assert s.start_time is None
    assert s.version is None
    (m,) = s.models
    assert m.model == "/models/qwen2.5-0.5b-q4_k_m.gguf"
    assert m.gauges == {"running": 2.0, "waiting": 0.0, "max_running": 4.0}
    assert "kv_usage" not in m.gauges  # current builds dropped kv_cache_usage_ratio
    assert m.counters == {"prompt_tokens": 18432.0, "generation_tokens": 2211.0}
    assert m.hists == {}
    assert s.ranks == []
    assert s.gpus == []
    assert s.extra == {
        "prompt_seconds_total": 12.0,
        "tokens_predicted_seconds_total": 41.0,
        "n_decode_total": 1893.0,
        "n_tokens_max": 4310.0,
        "n_busy_slots_per_decode": 1.16798,
        "prompt_tokens_per_s": 1517.33,
        "predicted_tokens_per_s": 54.1129,
        "process_start_mark": 1763800000.0,
    }


def test_defaults_without_identity_or_header():
    s = llamacpp.normalize(TEXT)
    assert s.start_time is None
    assert s.models[0].model == "default"
    assert "max_running" not in s.models[0].gauges


def test_header_case_and_bad_value():
    s = llamacpp.normalize(TEXT, headers={"process-start-time-unix": "17.5"})
    assert s.extra["process_start_mark"] == 17.5 and s.start_time is None
    s = llamacpp.normalize(TEXT, headers={"process-start-time-unix": "x"})
    assert "process_start_mark" not in s.extra and s.start_time is None


def test_start_mark_change_is_a_restart_and_no_uptime_is_made_up():
    """A real build sent ``Process-Start-Time-Unix: 2981792143`` (monotonic µs, not unix s):
    a changed mark is a restart, and no uptime is derived from it."""
    from llmtop.history.derive import derive_lifetime, restart_reason

    a = llamacpp.normalize(TEXT, headers={"Process-Start-Time-Unix": "2981792143"})
    same = llamacpp.normalize(TEXT, headers={"Process-Start-Time-Unix": "2981792143"})
    b = llamacpp.normalize(TEXT, headers={"Process-Start-Time-Unix": "3050000000"})
    assert restart_reason(a, same) is None
    assert restart_reason(a, b) == "process start time changed"
    life = derive_lifetime(a.models[0], start_time=a.start_time, t_wall=1795796676.0)
    assert life["uptime_s"] is None


OLD = """# HAND-MADE edge case: 2024-era gauges (examples/server/server.cpp) plus a NaN
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.375
# TYPE llamacpp:kv_cache_tokens gauge
llamacpp:kv_cache_tokens 1536
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing NaN
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 8.12890e+06
"""


def test_old_build_kv_and_nan():
    s = llamacpp.normalize(OLD, identity={"version": "b3600"})
    m = s.models[0]
    assert s.version == "b3600"
    assert m.gauges == {"kv_usage": 0.375}  # NaN running is absent, not 0
    assert m.counters == {"prompt_tokens": 8128900.0}
    assert s.extra == {"kv_cache_tokens": 1536.0}


def test_counter_reset_pair():
    a = llamacpp.normalize(TEXT).models[0].counters["prompt_tokens"]
    b = llamacpp.normalize(TEXT.replace("prompt_tokens_total 18432", "prompt_tokens_total 10"))
    assert b.models[0].counters["prompt_tokens"] == 10.0 < a


def test_cached_prompt_tokens_and_spec_counters():
    (m,) = llamacpp.normalize(NEW).models
    assert m.counters == {
        "prompt_tokens": 6144.0 + 12288.0,  # computed + cached: every prompt token
        "prefix_hits": 12288.0,  # prompt_tokens_cached_total
        "prefix_queries": 6144.0 + 12288.0,
        "generation_tokens": 2211.0,
        "spec_drafts": 400.0,
        "spec_draft_tokens": 1600.0,
        "spec_accepted_tokens": 1180.0,
    }
    assert m.gauges == {"running": 2.0, "waiting": 1.0}


def test_older_build_without_cached_counter_has_no_prefix_or_spec():
    (m,) = llamacpp.normalize(TEXT).models
    assert m.counters["prompt_tokens"] == 18432.0  # prompt_tokens_total as it is
    assert "prefix_hits" not in m.counters and "prefix_queries" not in m.counters
    assert not any(k.startswith("spec_") for k in m.counters)


@pytest.mark.parametrize(
    "body",
    [
        "",
        '{"error":{"code":501,"message":"This server does not support metrics endpoint."}}',
        "<html></html>",
        "vllm:num_requests_running 1\n",
    ],
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        llamacpp.normalize(body)



def test_real_build_under_load():
    """A real llama-server (sdist 11434.0.0) under load: 2 slots busy, 4 deferred, cached
    prompt tokens counted apart; no KV gauge in this build."""
    s = llamacpp.normalize(
        fixture_text("llamacpp-real-b0-sdist-11434.0.0-under-load.txt"),
        headers={"Process-Start-Time-Unix": "2981792143"},
        identity={"model_path": "/cache/tiny-llama.gguf", "total_slots": 2},
    )
    (m,) = s.models
    assert m.gauges == {"running": 2.0, "waiting": 4.0, "max_running": 2.0}
    assert m.counters["generation_tokens"] == 3433.0
    assert m.counters["prompt_tokens"] == 524.0 + 325.0  # computed + cached
    assert m.counters["prefix_hits"] == 325.0
    assert m.counters["prefix_queries"] == 849.0
    assert m.counters["spec_draft_tokens"] == 0.0
    assert s.start_time is None and s.extra["process_start_mark"] == 2981792143.0
    assert s.extra["n_tokens_max"] == 403.0
