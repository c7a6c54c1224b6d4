"""TGI adapter on the synthetic fixture (format from TGI's router + metrics-exporter-prometheus)."""

from __future__ import annotations

import math

import pytest

from llmtop.model import Hist
from llmtop.parse import tgi
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text

TEXT = fixture_text("tgi-SYNTHETIC-from-server-rs.txt")
INFO = {
    "model_id": "bigscience/bloom-560m",
    "version": "3.3.6",
    "max_concurrent_requests": 128,
    "max_batch_size": None,
    "max_input_tokens": 1024,
    "max_total_tokens": 2048,
}


def test_fixture_fields():
    s = tgi.normalize(TEXT, identity=INFO)
    assert s.engine == "tgi"
    assert s.version == "3.3.6"
    assert s.start_time is None
    (m,) = s.models
    assert m.model == "bigscience/bloom-560m"
    assert m.gauges == {
        "running": 8.0,
        "waiting": 4.0,
        "kv_capacity_tokens": 163840.0,
        "kv_usage": 40960 / 163840,
    }
    assert m.counters == {
        "errors": 9.0,
        "rejected": 3.0,
        "requests": 119.0,
        "prompt_tokens": 27500.0,
        "generation_tokens": 14080.0,
    }
    assert m.counters_by == {"finished": {"success": 110.0, "error": 9.0},
                             "error": {"validation": 6.0, "overloaded": 3.0}}
    assert m.hists["e2e"] == Hist(
        (0.00015, 1.2974, 6.5683, math.inf), (0, 30, 100, 110), 352.5, 110
    )
    assert m.hists["queue"] == Hist((0.00015, 0.05766, math.inf), (20, 100, 110), 2.2, 110)
    assert m.hists["tpot"] == Hist((0.01709, 0.02563, math.inf), (10, 104, 110), 2.31, 110)
    assert m.hists["itl"] == Hist(
        (0.01709, 0.02563, math.inf), (2000, 20000, 20480), 409.6, 20480
    )  # decode steps only; prefill steps are excluded
    assert m.hists["prompt_len"] == Hist((40, 400, math.inf), (20, 100, 110), 27500, 110)
    assert m.hists["gen_len"] == Hist((20, 200, math.inf), (5, 100, 110), 14080, 110)
    assert "ttft" not in m.hists  # TGI has no TTFT metric
    assert "prefix_hits" not in m.counters
    assert "preemptions" not in m.counters
    assert "max_running" not in m.gauges  # max_batch_size is null in /info
    assert m.info == {
        "max_concurrent_requests": "128",
        "max_input_tokens": "1024",
        "max_total_tokens": "2048",
    }
    assert s.extra == {"requests_received": 120.0}


def test_no_identity():
    s = tgi.normalize(TEXT)
    assert s.models[0].model == "default"
    assert s.version is None


def test_summary_rendered_durations_become_mean_only():
    body = """# HAND-MADE: a duration rendered as a summary (no buckets configured), a NaN gauge
# TYPE tgi_request_duration summary
tgi_request_duration{quantile="0.5"} 1.5
tgi_request_duration{quantile="0.99"} 4
tgi_request_duration_sum 30
tgi_request_duration_count 12
# TYPE tgi_queue_size gauge
tgi_queue_size NaN
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 2
"""
    s = tgi.normalize(body, identity={"model_id": "m", "max_batch_size": 16})
    m = s.models[0]
    assert m.hists == {"e2e": Hist((), (), 30.0, 12.0)}
    assert m.gauges == {"running": 2.0, "max_running": 16.0}  # NaN waiting is absent
    assert m.counters == {}


def test_counter_reset_pair():
    a = tgi.normalize(TEXT).models[0]
    b = tgi.normalize(TEXT.replace("tgi_request_success 110", "tgi_request_success 1")).models[0]
    assert b.counters_by["finished"]["success"] == 1.0 < a.counters_by["finished"]["success"]


@pytest.mark.parametrize(
    "body", ["", "<!doctype html><html></html>", "{}", "vllm:num_requests_running 1\n"]
)
def test_garbage_raises(body):
    with pytest.raises(ParseError):
        tgi.normalize(body)

