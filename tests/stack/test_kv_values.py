"""The KV values of a row (``model.KvTransfer``, ``KvTiers``, ``KvTier``): a field is shown
and written to JSON when the engine exports it, as ``–``/null when exported but unknown, and
not at all when not exported; every table that names their fields names real ones."""

from __future__ import annotations

import pytest

from llmtop.console import once_kv
from llmtop.export import kv as export_kv
from llmtop.model import (
    KV_TIER_FIELDS,
    KV_TIERS_FIELDS,
    KV_TRANSFER_FIELDS,
    EngineRow,
    KvTier,
    KvTiers,
    KvTransfer,
    Quantiles,
)
from llmtop.ui.screens import kv as ui_kv


def test_json_has_the_exported_fields_in_order_and_null_for_unknown():
    kt = KvTransfer.of(expired_per_s=None, time_s=Quantiles(p50=0.1, count=1.0),
                       queues={"q": 2.0})
    assert kt.to_json() == {"time_s": Quantiles(p50=0.1, count=1.0).to_json(),
                            "expired_per_s": None, "queues": {"q": 2.0}}
    assert list(kt.to_json()) == ["time_s", "expired_per_s", "queues"]  # declaration order
    assert kt.reported("expired_per_s") and not kt.reported("bytes_per_s")
    tiers = KvTiers(hit_rate=0.5, tiers={"1:fs": KvTier.of(hit_rate=None)})
    row = EngineRow(key="e|m", target="e", kv_transfer=kt, kv_tiers=tiers)
    assert row.to_json()["kv_tiers"] == {"hit_rate": 0.5, "tiers": {"1:fs": {"hit_rate": None}}}
    assert EngineRow(key="e|m", target="e").to_json()["kv_transfer"] is None


def test_unknown_must_name_a_field():
    with pytest.raises(ValueError, match="bytes_per_sec"):
        KvTransfer(unknown=frozenset({"bytes_per_sec"}))


def test_every_table_names_real_fields():
    assert {n for n, _, _ in ui_kv.TRANSFER} <= set(KV_TRANSFER_FIELDS)
    assert {n for n, _, _ in ui_kv.TIERS} <= set(KV_TIERS_FIELDS)
    assert {n for n, _, _ in ui_kv.TIER_COLS} <= set(KV_TIER_FIELDS)
    assert {n for n, _, _ in once_kv.TRANSFER} <= set(KV_TRANSFER_FIELDS)
    assert {n for n, _, _ in once_kv.TIERS} <= set(KV_TIERS_FIELDS)
    assert {f for _, f in export_kv.TRANSFER} <= set(KV_TRANSFER_FIELDS)
    assert {f for _, f in export_kv.TIERS} <= set(KV_TIERS_FIELDS)
    assert {f for p in export_kv.KV_DIRECTIONS.values() for f, _ in p} <= set(KV_TIERS_FIELDS)
    assert {f for _, f, _ in export_kv.PER_TIER} <= set(KV_TIER_FIELDS)
