"""vLLM's KV offloading connector and SimpleCPUOffload series: parsed by the vLLM adapter,
derived over a window into ``kv_tiers`` (per tier hit rate, offload and load-back rates)."""

from __future__ import annotations

import json

import pytest

from llmtop.parse import registry
from tests.conftest import fixture_text

from .build import feed, scaled, store_with, target

OFF = "stack/vllm-kv-offload-SYNTHETIC.txt"
SIMPLE = "stack/vllm-simple-kv-offload-SYNTHETIC.txt"


def test_offloading_connector_keys():
    m = registry.normalize("vllm", fixture_text(OFF)).models[0]
    c = m.counters
    assert c["offload_store_bytes"] == 8e9 and c["offload_load_bytes"] == 2e9
    assert c["offload_failed"] == 2.0
    by = m.counters_by
    assert by["tier_chunk_queries"]["0:primary"] == 1000.0
    assert by["tier_chunk_hits"]["1:fs"] == 100.0
    assert by["tier_read_bytes"]["1:fs"] == 1e9 and by["tier_write_bytes"]["1:fs"] == 3e9
    assert by["tier_failed"]["1:fs"] == 4.0  # 1 promotion + 3 cascade job failures
    assert "0:primary" not in by["tier_failed"]  # never reported for the primary tier
    assert not any(k.startswith("tier_") and ":" in k for k in c)  # a tier is structure
    assert m.gauges["offload_pinned"] == 0.25


def test_deprecated_transfer_type_names_are_read_when_alone():
    text = "\n".join(ln for ln in fixture_text(OFF).splitlines()
                     if "kv_offload_store_bytes" not in ln and "kv_offload_load_bytes" not in ln)
    c = registry.normalize("vllm", text).models[0].counters
    assert c["offload_store_bytes"] == 8e9 and c["offload_load_bytes"] == 2e9


def test_simple_offload_keys():
    m = registry.normalize("vllm", fixture_text(SIMPLE)).models[0]
    assert m.counters["offload_load_blocks"] == 120.0
    assert m.counters["offload_stored_blocks"] == 500.0
    assert m.counters["offload_dropped_blocks"] == 20.0
    assert m.gauges["offload_used_blocks"] == 40.0
    assert m.gauges["offload_capacity_blocks"] == 4096.0


def _row(*bodies):
    s = store_with(target("e", 8000, "vllm"))
    for t, body in enumerate(bodies):
        feed(s, "e", 10.0 * t, body)
    [row] = s.snapshot(30.0).engines
    return row


def test_windowed_offload_rates_and_tier_hit_rates():
    text = fixture_text(OFF)
    kt = _row(text, scaled(text, 1.5)).kv_tiers
    assert kt.offload_bytes_per_s == pytest.approx(4e9 / 10)
    assert kt.load_back_bytes_per_s == pytest.approx(1e9 / 10)
    assert kt.failures_per_s == pytest.approx(1 / 10)
    assert kt.pinned == 0.25
    fs = kt.tiers["1:fs"]
    assert fs.hit_rate == pytest.approx(50 / 200)  # deltas, not the lifetime totals
    assert fs.offload_bytes_per_s == pytest.approx(1.5e9 / 10)
    assert fs.load_back_bytes_per_s == pytest.approx(0.5e9 / 10)
    assert fs.failures_per_s == pytest.approx(2 / 10)
    assert kt.tiers["0:primary"].hit_rate == pytest.approx(300 / 500)
    assert not kt.tiers["0:primary"].reported("failures_per_s")  # not exported for it
    assert "failures_per_s" not in kt.to_json()["tiers"]["0:primary"]
    json.dumps(_row(text, scaled(text, 1.5)).to_json())


def test_counter_reset_gives_no_negative_rate():
    text = fixture_text(OFF)
    kt = _row(scaled(text, 3.0), text, scaled(text, 1.5)).kv_tiers  # restarted after t=0
    assert kt.offload_bytes_per_s == pytest.approx(4e9 / 10)
    assert kt.tiers["1:fs"].hit_rate == pytest.approx(0.25)
    restarted = _row(scaled(text, 3.0), text).kv_tiers  # one point since the restart
    assert restarted.offload_bytes_per_s is None
    assert restarted.tiers["1:fs"].hit_rate is None


def test_no_queries_in_window_is_none_not_zero():
    text = fixture_text(OFF)
    kt = _row(text, text).kv_tiers
    assert kt.tiers["1:fs"].hit_rate is None
    assert kt.offload_bytes_per_s == 0.0  # the counter is there and did not move


def test_simple_offload_rates():
    text = fixture_text(SIMPLE)
    kt = _row(text, scaled(text, 2.0)).kv_tiers
    assert kt.load_back_blocks_per_s == pytest.approx(12.0)
    assert kt.offload_blocks_per_s == pytest.approx(50.0)
    assert kt.dropped_blocks_per_s == pytest.approx(2.0)
    assert kt.pinned == pytest.approx(40 / 4096)


def test_engine_without_offload_series_has_no_tiers():
    row = _row(*(fixture_text("vllm-real-cpu-v0.32.0-calm-a.txt"),) * 2)
    assert row.kv_tiers is None and row.to_json()["kv_tiers"] is None
