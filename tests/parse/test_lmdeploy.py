"""LMDeploy adapter on the synthetic (from loggers.py) fixture and newer-name inputs."""

from __future__ import annotations

import math

from llmtop.parse import lmdeploy
from tests.conftest import fixture_text

FIXTURE = "lmdeploy-SYNTHETIC-from-loggers-py.txt"


def test_fixture_says_it_is_synthetic():
    head = fixture_text(FIXTURE).split("\n", 3)
    assert head[0].startswith("# source: InternLM/lmdeploy lmdeploy/metrics/loggers.py")
    assert "SYNTHETIC" in head[1]


def test_synthetic_from_loggers_py():
    s = lmdeploy.normalize(fixture_text(FIXTURE), identity={"version": "0.10.2"})
    assert s.engine == "lmdeploy" and s.version == "0.10.2"
    assert s.ranks == [] and s.start_time is None
    (m,) = s.models
    assert m.model == "internlm/internlm2_5-7b-chat"
    assert m.gauges == {"running": 3.0, "waiting": 1.0, "kv_usage": 0.125}
    assert m.counters == {
        "prompt_tokens": 2300.0,
        "generation_tokens": 640.0,
        "requests": 5.0,
        "aborted": 1.0,
        "errors": 0.0,
    }
    assert m.counters_by == {"finished": {"finish": 4.0, "cancel": 1.0,
                                          "internal_engine_error": 0.0}}
    assert "prefix_hits" not in m.counters  # no cached_tokens_total in that version
    assert set(m.hists) == {"ttft", "itl", "tpot", "e2e", "queue", "prompt_len", "gen_len",
                            "prefill", "decode", "inference", "iteration_tokens"}
    ttft = m.hists["ttft"]
    assert (ttft.sum, ttft.count) == (0.99, 5.0)
    assert ttft.bounds[:4] == (0.001, 0.005, 0.01, 0.02) and ttft.bounds[-1] == math.inf
    itl = m.hists["itl"]  # iter_token_latency
    assert itl.bounds[:4] == (0.005, 0.01, 0.025, 0.05)
    assert itl.cumulative[:4] == (0.0, 1.0, 5.0, 6.0)
    assert itl.count == 6.0 and math.isclose(itl.sum, 0.12)
    assert m.hists["tpot"].count == 5.0 and math.isclose(m.hists["tpot"].sum, 0.095)
    assert m.hists["e2e"].count == 5.0 and math.isclose(m.hists["e2e"].sum, 13.6)
    assert m.hists["queue"].cumulative[:2] == (4.0, 5.0)
    assert (m.hists["prompt_len"].sum, m.hists["gen_len"].sum) == (2300.0, 640.0)
    assert m.hists["prompt_len"].bounds[-2:] == (2000.0, math.inf)
    assert "spec_accept_rate_gauge" not in m.gauges and "spec_draft_tokens" not in m.counters


def test_phase_and_iteration_histograms():
    (m,) = lmdeploy.normalize(fixture_text(FIXTURE)).models
    pre, dec, inf = m.hists["prefill"], m.hists["decode"], m.hists["inference"]
    assert (pre.count, pre.sum) == (5.0, 0.95)
    assert pre.bounds[:4] == (0.3, 0.5, 0.8, 1.0) and pre.cumulative[:2] == (4.0, 5.0)
    assert (dec.count, dec.sum) == (5.0, 11.7) and dec.cumulative[:4] == (0.0, 0.0, 1.0, 2.0)
    assert (inf.count, inf.sum) == (5.0, 12.7)
    it = m.hists["iteration_tokens"]  # lmdeploy:iteration_tokens_total, a histogram
    assert (it.count, it.sum) == (4.0, 578.0)
    assert it.bounds[:4] == (1.0, 8.0, 16.0, 32.0) and it.cumulative[:4] == (0.0, 0.0, 0.0, 2.0)


# Names and values as lmdeploy's own test asserts them (its
# test_prometheus_stat_logger_records_specdecode_metrics: two drafts of 3, 2 + 1 accepted).
SPEC = """# HAND-MADE from lmdeploy's PrometheusStatLogger spec-decode test
# TYPE lmdeploy:spec_decode_num_drafts_total counter
lmdeploy:spec_decode_num_drafts_total{engine="2",model_name="test-model"} 2.0
# TYPE lmdeploy:spec_decode_num_draft_tokens_total counter
lmdeploy:spec_decode_num_draft_tokens_total{engine="2",model_name="test-model"} 6.0
# TYPE lmdeploy:spec_decode_num_accepted_tokens_total counter
lmdeploy:spec_decode_num_accepted_tokens_total{engine="2",model_name="test-model"} 3.0
# TYPE lmdeploy:spec_decode_mean_accept_rate gauge
lmdeploy:spec_decode_mean_accept_rate{engine="2",model_name="test-model"} 0.5
"""


def test_spec_decode_counters_and_gauge():
    (m,) = lmdeploy.normalize(SPEC).models
    assert m.counters == {"spec_drafts": 2.0, "spec_draft_tokens": 6.0,
                          "spec_accepted_tokens": 3.0}
    assert m.gauges == {"spec_accept_rate_gauge": 0.5}


def test_newer_names_and_ranks():
    text = (
        "# TYPE lmdeploy:num_requests_running gauge\n"
        'lmdeploy:num_requests_running{engine="0",model_name="m"} 2.0\n'
        'lmdeploy:num_requests_running{engine="1",model_name="m"} 5.0\n'
        "# TYPE lmdeploy:prefix_cache_hit_rate gauge\n"
        'lmdeploy:prefix_cache_hit_rate{engine="0",model_name="m"} 0.5\n'
        "# TYPE lmdeploy:prompt_tokens_total counter\n"
        'lmdeploy:prompt_tokens_total{engine="0",model_name="m"} 100.0\n'
        'lmdeploy:prompt_tokens_total{engine="1",model_name="m"} 300.0\n'
        "# TYPE lmdeploy:cached_tokens_total counter\n"
        'lmdeploy:cached_tokens_total{engine="1",model_name="m"} 60.0\n'
    )
    s = lmdeploy.normalize(text)
    (m,) = s.models
    assert m.gauges == {"running": 7.0, "prefix_hit_rate_gauge": 0.5}
    assert m.counters == {"prompt_tokens": 400.0, "prefix_queries": 400.0, "prefix_hits": 60.0}
    assert [r.rank for r in s.ranks] == ["0", "1"]
    assert s.ranks[0].counters["prefix_hits"] == 0.0
