"""The exporter's ``llmtop_kv_*`` series equal ``kv_transfer`` / ``kv_tiers`` of
``--once --json`` for the same snapshot (rows windowed from the stack fixtures), every null
or missing key an absent series, and nothing else served under those names."""

from __future__ import annotations

import json

from llmtop.export.view import View, build
from llmtop.model import KvTier, KvTiers, KvTransfer, Quantiles, Snapshot
from llmtop.once import snapshot_json
from tests.conftest import fixture_text
from tests.stack.build import feed, scaled, store_with, target

FIXTURES = (("a", "vllm", "stack/vllm-nixl-lmcache-SYNTHETIC.txt"),
            ("b", "sglang", "stack/sglang-pd-hicache-SYNTHETIC.txt"),
            ("c", "sglang", "stack/sglang-decode-kv-stages-SYNTHETIC.txt"),
            ("d", "vllm", "stack/vllm-kv-offload-SYNTHETIC.txt"),
            ("e", "vllm", "vllm-real-cpu-v0.32.0-calm-a.txt"),
            ("f", "vllm", "stack/vllm-simple-kv-offload-SYNTHETIC.txt"))
Q = (("0.5", "p50"), ("0.9", "p90"), ("0.95", "p95"), ("0.99", "p99"))
SCALAR = {"latency_now_s": "llmtop_kv_transfer_latency_now_seconds",
          "bytes_per_s": "llmtop_kv_transfer_bytes_per_second",
          "failures_per_s": "llmtop_kv_transfer_failures_per_second",
          "expired_per_s": "llmtop_kv_transfer_expired_per_second"}
TIER = {"hit_rate": ("llmtop_kv_offload_hit_ratio", {}),
        "usage": ("llmtop_kv_offload_usage_ratio", {}),
        "used_bytes": ("llmtop_kv_offload_used_bytes", {}),
        "used_tokens": ("llmtop_kv_offload_used_tokens", {}),
        "pinned": ("llmtop_kv_offload_pinned_ratio", {}),
        "failures_per_s": ("llmtop_kv_offload_failures_per_second", {}),
        "offload_bytes_per_s": ("llmtop_kv_offload_bytes_per_second", {"direction": "offload"}),
        "load_back_bytes_per_s": ("llmtop_kv_offload_bytes_per_second",
                                  {"direction": "load_back"}),
        "offload_tokens_per_s": ("llmtop_kv_offload_tokens_per_second",
                                 {"direction": "offload"}),
        "load_back_tokens_per_s": ("llmtop_kv_offload_tokens_per_second",
                                   {"direction": "load_back"}),
        "evicted_tokens_per_s": ("llmtop_kv_offload_tokens_per_second",
                                 {"direction": "evicted"}),
        "offload_blocks_per_s": ("llmtop_kv_offload_blocks_per_second",
                                 {"direction": "offload"}),
        "load_back_blocks_per_s": ("llmtop_kv_offload_blocks_per_second",
                                   {"direction": "load_back"}),
        "dropped_blocks_per_s": ("llmtop_kv_offload_blocks_per_second",
                                 {"direction": "dropped"})}


def _snapshot() -> Snapshot:
    s = store_with(*(target(n, 8000 + i, eng) for i, (n, eng, _) in enumerate(FIXTURES)))
    for n, _eng, fx in FIXTURES:
        text = fixture_text(fx)
        for t, k in ((0.0, 1.0), (10.0, 1.5)):
            feed(s, n, t, scaled(text, k))
    return s.snapshot(30.0)


def _expected(rows: list[dict]) -> dict[tuple[str, frozenset], float | None]:
    """(series, labels) -> the JSON's value (None: must be absent)."""
    out: dict[tuple[str, frozenset], float | None] = {}

    def put(name, row, value, **more):
        labels = {"target": row["target"], "engine": row["engine"], "model": row["model"],
                  "role": row.get("role"), **more}
        out[(name, frozenset((k, v) for k, v in labels.items() if v))] = value

    def quantiles(name, row, q, **more):
        for label, f in Q:
            put(name, row, (q or {}).get(f), quantile=label, **more)

    for row in rows:
        kt = row["kv_transfer"] or {}
        if "time_s" in kt:
            quantiles("llmtop_kv_transfer_seconds", row, kt["time_s"])
        for key, name in SCALAR.items():
            if key in kt:
                put(name, row, kt[key])
        for queue, v in (kt.get("queues") or {}).items():
            put("llmtop_kv_transfer_queue_requests", row, v, queue=queue)
        for stage, q in (kt.get("stages") or {}).items():
            quantiles("llmtop_kv_transfer_stage_seconds", row, q, stage=stage)
        for src, v in (kt.get("prompt_tokens_by_source") or {}).items():
            put("llmtop_kv_prompt_tokens_per_second", row, v, source=src)
        ti = row["kv_tiers"] or {}
        for key, (name, more) in TIER.items():
            if key in ti:
                put(name, row, ti[key], **more)
        for tier, v in (ti.get("cached_tokens_per_s") or {}).items():
            put("llmtop_kv_cache_hit_tokens_per_second", row, v, tier=tier)
        for tier, d in (ti.get("tiers") or {}).items():
            for key, (name, more) in TIER.items():
                if key in d:
                    put(name, row, d[key], tier=tier, **more)
    return out


def _served(snap: Snapshot) -> dict[tuple[str, frozenset], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for m in build(View(version="t", mode="direct", snap=snap))
            for s in m.samples if s.name.startswith("llmtop_kv_")}


def test_kv_series_equal_once_json():
    snap = _snapshot()
    doc = json.loads(snapshot_json(snap))
    want = _expected(doc["engines"])
    got = _served(snap)
    present = {k: v for k, v in want.items() if v is not None}
    assert got == present  # every value served, nothing else under llmtop_kv_*
    names = {k[0] for k in got}
    assert {"llmtop_kv_transfer_seconds", "llmtop_kv_transfer_bytes_per_second",
            "llmtop_kv_transfer_failures_per_second", "llmtop_kv_transfer_queue_requests",
            "llmtop_kv_transfer_stage_seconds", "llmtop_kv_prompt_tokens_per_second",
            "llmtop_kv_offload_hit_ratio", "llmtop_kv_offload_bytes_per_second",
            "llmtop_kv_offload_tokens_per_second", "llmtop_kv_offload_blocks_per_second",
            "llmtop_kv_offload_failures_per_second"} <= names
    # a secondary tier is labelled, the engine's total is not
    d = {dict(k[1]).get("tier"): v for k, v in got.items()
         if k[0] == "llmtop_kv_offload_bytes_per_second" and ("target", "d") in k[1]
         and ("direction", "offload") in k[1]}
    assert set(d) == {None, "1:fs"}
    assert not any(("target", "e") in k[1] for k in got)  # no KV series: none served


def test_missing_and_none_are_absent():
    snap = _snapshot()
    row = next(r for r in snap.engines if r.target == "a")
    row.kv_transfer = KvTransfer.of(time_s=None, bytes_per_s=None,
                                    stages={"x": Quantiles(p50=None, p95=0.1)})
    row.kv_tiers = KvTiers.of(hit_rate=None, tiers={"0:primary": KvTier.of(hit_rate=None)})
    got = {(n, dict(lb).get("quantile")): v for (n, lb), v in _served(snap).items()
           if ("target", "a") in lb}
    assert got == {("llmtop_kv_transfer_stage_seconds", "0.95"): 0.1}
