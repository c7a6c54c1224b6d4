"""A Dynamo worker's system port (``dynamo_component_*``): an engine row with its role."""

from __future__ import annotations

import pytest

from llmtop.parse import registry
from llmtop.parse.detect import engine_from_body
from llmtop.parse.exposition import ParseError
from tests.conftest import fixture_text

from .build import feed, scaled, store_with, target

FIX = "stack/dynamo-worker-prefill-SYNTHETIC.txt"


def _model(text):
    return registry.normalize("dynamo_worker", text).models[0]


def test_worker_series_parse_into_a_row_sample():
    text = fixture_text(FIX)
    assert engine_from_body(text) == "dynamo_worker"
    m = _model(text)
    assert m.model == "Qwen/Qwen3-0.6B"
    assert m.gauges["running"] == 3.0  # the generate endpoint's in-flight requests only
    assert m.counters["requests"] == 420.0  # clear_kv_blocks (an admin RPC) is not a request
    assert m.counters["errors"] == 2.0
    assert m.hists["e2e"].count == 420.0 and m.hists["e2e"].sum == pytest.approx(33.6)
    assert m.gauges["kv_usage"] == pytest.approx(0.25)  # 250 / 1000 blocks
    assert m.gauges["prefix_hit_rate_gauge"] == 0.4
    assert m.info["kv_role"] == "prefill"
    assert "waiting" not in m.gauges  # not reported: None, never 0


def _without(text, *names):
    return "\n".join(ln for ln in text.splitlines() if not any(n in ln for n in names))


def test_kv_usage_from_the_gauge_is_a_fraction_and_a_0_100_reading_is_scaled():
    text = _without(fixture_text(FIX), "kvstats_active_blocks", "kvstats_total_blocks")
    assert _model(text).gauges["kv_usage"] == pytest.approx(0.25)
    pct = text.replace('gpu_cache_usage_percent{dp_rank="0"} 0.25',
                       'gpu_cache_usage_percent{dp_rank="0"} 25')
    assert _model(pct).gauges["kv_usage"] == pytest.approx(0.25)
    none = _without(text, "gpu_cache_usage_percent")
    assert "kv_usage" not in _model(none).gauges


def test_role_from_the_component_label():
    text = fixture_text(FIX)
    backend = text.replace('dynamo_component="prefill"', 'dynamo_component="backend"')
    assert "kv_role" not in _model(backend).info  # decode or aggregated: not known
    decode = text.replace('dynamo_component="prefill"', 'dynamo_component="decode"')
    assert _model(decode).info["kv_role"] == "decode"


def test_engine_pass_through_keeps_its_adapter_and_gains_the_role():
    vllm = fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt")
    both = vllm + _without(fixture_text(FIX), "# source")
    assert engine_from_body(both) == "vllm"
    m = registry.normalize("vllm", both).models[0]
    assert m.info["kv_role"] == "prefill"
    assert "kv_role" not in registry.normalize("vllm", vllm).models[0].info


def test_a_standalone_router_or_garbage_is_a_parse_error():
    router = ('# TYPE dynamo_component_inflight_requests gauge\n'
              'dynamo_component_inflight_requests{dynamo_component="router",'
              'dynamo_endpoint="find_worker"} 0\n')
    for body in (router, "<html>no</html>", ""):
        with pytest.raises(ParseError):
            registry.normalize("dynamo_worker", body)


def _row(*bodies):
    s = store_with(target("w", 8081, "dynamo_worker"))
    for i, body in enumerate(bodies):
        feed(s, "w", 10.0 * i, body)
    [row] = s.snapshot(30.0).engines
    return row


def test_windowed_rates_role_and_reset():
    text = fixture_text(FIX)
    row = _row(text, scaled(text, 1.5))
    assert row.requests_per_s == pytest.approx(21.0)  # 210 requests in 10 s
    assert row.errors_per_s == pytest.approx(0.1)
    assert row.e2e_s.count == pytest.approx(210)
    assert row.role == "prefill" and row.kv_cache_usage == pytest.approx(0.25)
    assert row.waiting is None and row.to_json()["waiting"] is None
    reset = _row(scaled(text, 2.0), text, scaled(text, 1.5))  # restarted after t=0
    assert reset.requests_per_s == pytest.approx(21.0)
    assert _row(scaled(text, 2.0), text).requests_per_s is None  # one point since
