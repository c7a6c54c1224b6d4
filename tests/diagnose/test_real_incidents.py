"""The rules on real vLLM text: pairs of ``/metrics`` scrapes 5 s apart, captured from CI's
real vLLM (0.32.0 CPU, tiny model) during the three incidents of
tests/real_engine/test_real_vllm_incidents.py and during a calm phase
(scripts/real_vllm/capture_incidents.py). Each pair goes through the store and ``--once``'s
diagnosis exactly as a live ``llmtop --once --window 5`` would: no server needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmtop.config import Config
from llmtop.history.store import Store
from llmtop.model import RawScrape
from llmtop.once import _diagnose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
T = "127.0.0.1:8000"
WALL0 = 1_795_000_000.0


def _once(name: str):
    store = Store(Config(), detect=lambda *a, **k: "vllm")
    snaps = []
    for i, part in enumerate("ab"):
        text = (FIXTURES / f"vllm-real-cpu-v0.32.0-{name}-{part}.txt").read_text()
        t = 5.0 * i
        store.ingest(RawScrape(target=T, url=f"http://{T}/metrics", t_wall=WALL0 + t,
                               t_mono=t, status="ok", http_status=200, body=text,
                               engine_hint="vllm"))
        snaps.append(store.commit(t, WALL0 + t))
    snap = store.once_snapshot(5.0)
    (row,) = snap.engines
    return row, _diagnose(snaps[0], snap, 5.0)


def test_calm_server_says_nothing():
    row, found = _once("calm")
    assert row.running is not None and row.running <= 1 and row.waiting == 0
    assert found == []


def test_queueing_on_real_text_is_named_from_few_requests():
    row, found = _once("queueing")
    assert row.running == 2 and row.waiting is not None and row.waiting >= 5
    assert row.queue_s is not None and row.queue_s.count < 20  # too few for the share rules
    assert found and found[0].rule == "queueing" and found[0].severity in ("warn", "critical")
    ev = {e.signal: e.value for e in found[0].evidence}
    assert ev["queue_over_service"] >= 2  # type: ignore[operator]
    assert "--max-num-seqs" in found[0].action


def test_kv_pressure_on_real_text_is_named_first():
    row, found = _once("kv-pressure")
    assert row.kv_capacity_tokens == 1536  # --num-gpu-blocks-override 12 x 128-token blocks
    assert row.preemptions_per_s is not None and row.preemptions_per_s * 5 >= 2
    assert found[0].rule == "kv_pressure" and found[0].severity == "critical"
    assert "preemptions/s" in found[0].summary


def test_prefix_collapse_on_real_text_against_the_lifetime_before_the_window():
    row, found = _once("prefix-collapse")
    assert row.prefix_hit_rate is not None and row.prefix_hit_rate < 0.1
    assert [f.rule for f in found][:1] == ["prefix_cache_miss"]
    base = {e.signal: e.baseline for e in found[0].evidence}
    assert base["hit_rate"] == pytest.approx(row.lifetime["prefix_hit_rate"], abs=0.1)
    assert "over its lifetime before this window" in found[0].summary


def test_queueing_in_bursts_on_real_text_is_named_from_the_histograms():
    """Poisson arrivals just above what --max-num-seqs 2 serves (scripts/real_vllm/
    capture_bursts.py): the waiting gauge is 0 at one end of the window, yet the requests
    that finished in it spent most of their TTFT queued. Before, the rule wanted a queue all
    window long and said nothing here (the real finding: ``ttft_rise`` instead)."""
    row, found = _once("queue-bursts")
    assert row.queue_s is not None and row.queue_s.count >= 20
    assert row.ttft_s is not None and row.queue_s.mean / row.ttft_s.mean >= 0.5
    assert found and found[0].rule == "queueing" and found[0].severity in ("warn", "critical")
    assert "the queue comes in bursts" in found[0].summary
    ev = {e.signal: e.value for e in found[0].evidence}
    assert ev["waiting_min"] == 0 and ev["requests"] == row.queue_s.count
    print(f"\n{found[0].severity} {found[0].summary}")
