"""KV transfer and KV tiers: read by the engine adapters, derived over a window on rows."""

from __future__ import annotations

import pytest

from llmtop.history.kv_rows import tokens_idle_s
from llmtop.model import ModelSample
from llmtop.parse import registry
from tests.conftest import fixture_text

from .build import feed, scaled, store_with, target

NIXL = "stack/vllm-nixl-lmcache-SYNTHETIC.txt"
SGL = "stack/sglang-pd-hicache-SYNTHETIC.txt"


def test_vllm_nixl_and_lmcache_keys():
    m = registry.normalize("vllm", fixture_text(NIXL)).models[0]
    assert m.hists["kv_xfer"].count == 200 and m.hists["kv_xfer"].sum == pytest.approx(7.4)
    assert m.counters["kv_xfer_failed"] == 4.0  # failed transfers + failed notifications
    assert m.counters["kv_xfer_bytes"] == 1.2e9 and m.counters["kv_expired"] == 0.0
    assert m.counters_by["prompt_tokens"]["external_kv_transfer"] == 99000.0
    assert m.gauges["tier_hit_rate"] == 0.6 and m.counters["tier_stored_tokens"] == 80000.0


def test_sglang_pd_and_hicache_keys_and_role():
    m = registry.normalize("sglang", fixture_text(SGL)).models[0]
    assert m.info["kv_role"] == "decode"
    assert m.gauges_by["kv_queue"]["decode_transfer"] == 5.0
    assert m.hists["kv_xfer"].sum == pytest.approx(5.2)  # ms -> s
    assert m.counters["kv_xfer_failed"] == 3.0
    assert m.gauges["tier_used_tokens"] == 300000.0


def test_unified_sglang_has_no_pd_queues_or_role():
    m = registry.normalize("sglang", fixture_text(
        "sglang-generated-v0.5.23-metrics_collector.txt")).models[0]
    assert "kv_queue" not in m.gauges_by
    assert "kv_role" not in m.info


def _row(fixture, engine):
    s = store_with(target("e", 8000, engine))
    text = fixture_text(fixture)
    for t, k in ((0.0, 1.0), (10.0, 1.5)):
        feed(s, "e", t, scaled(text, k))
    [row] = s.snapshot(30.0).engines
    return row


def test_rows_carry_windowed_kv_transfer_and_tiers():
    row = _row(NIXL, "vllm")
    kt = row.kv_transfer
    assert kt.time_s.count == pytest.approx(100)  # 200 -> 300 transfers
    assert kt.time_s.mean == pytest.approx(3.7 / 100)
    assert kt.failures_per_s == pytest.approx(2 / 10)
    assert kt.bytes_per_s == pytest.approx(0.6e9 / 10)
    assert kt.prompt_tokens_by_source["external_kv_transfer"] == pytest.approx(4950)
    assert row.role == "decode"  # its prompts come from the KV transfer
    assert row.kv_tiers.hit_rate == pytest.approx(15000 / 25000)
    assert row.kv_tiers.offload_tokens_per_s == pytest.approx(4000)


def test_sglang_rows():
    row = _row(SGL, "sglang")
    assert row.role == "decode"
    assert row.kv_transfer.queues == {"decode_prealloc": 3.0, "decode_transfer": 5.0}
    assert row.kv_tiers.usage == pytest.approx(0.3)
    assert row.kv_tiers.load_back_tokens_per_s == pytest.approx(350)


def test_engine_without_kv_series_has_none():
    row = _row("vllm-real-cpu-v0.32.0-calm-a.txt", "vllm")
    assert row.kv_transfer is None or row.kv_transfer.time_s is None
    assert row.kv_tiers is None


def _m(gen, running, waiting=0.0):
    return ModelSample("m", counters={"generation_tokens": gen},
                       gauges={"running": running, "waiting": waiting})


def test_tokens_idle_s():
    busy = [(0.0, _m(10, 2)), (5.0, _m(20, 2)), (10.0, _m(20, 2)), (20.0, _m(20, 2))]
    assert tokens_idle_s(busy) == 15.0  # tokens last moved between 0 and 5 s
    moving = [(0.0, _m(10, 2)), (5.0, _m(20, 2))]
    assert tokens_idle_s(moving) == 0.0
    empty = [(0.0, _m(20, 0)), (5.0, _m(20, 0))]
    assert tokens_idle_s(empty) == 0.0  # nothing held: not idle
    assert tokens_idle_s(busy[:1]) is None
    assert tokens_idle_s([(0.0, ModelSample("m")), (1.0, ModelSample("m"))]) is None
    prefill = [(t, _m(20, 2)) for t in (0.0, 10.0, 20.0)]
    for i, (_t, m) in enumerate(prefill):
        m.counters["prompt_tokens"] = 1000.0 * i  # a long prompt prefilled chunk by chunk
    assert tokens_idle_s(prefill) == 0.0


def test_vllm_cache_hits_by_tier():
    """vLLM 0.33's prompt_tokens_cached_by_source: which tier served the hits. Its generated
    fixture has device hits only (no offload tier: no kv_tiers); with host hits it has."""
    text = fixture_text("vllm-generated-v0.33.0-loggers.txt")
    m = registry.normalize("vllm", text).models[0]
    assert m.counters_by["cached_tokens"]["device"] == 2048.0
    assert _row("vllm-generated-v0.33.0-loggers.txt", "vllm").kv_tiers is None
    host = text.replace('source="host"} 0.0', 'source="host"} 1000.0')
    s = store_with(target("e", 8000, "vllm"))
    feed(s, "e", 0.0, host)
    feed(s, "e", 10.0, scaled(host, 2.0))
    [row] = s.snapshot(30.0).engines
    assert row.kv_tiers.cached_tokens_per_s["host"] == pytest.approx(100.0)
    assert row.kv_tiers.cached_tokens_per_s["device"] == pytest.approx(204.8)
