"""Store: ingest, states, rows, series with gaps, events (explicit timestamps, no sleeps)."""

from __future__ import annotations

import math

import pytest

from llmtop.config import Config, Target
from llmtop.history.store import WINDOWS, Store

from .fakes import body, fake_detect, fake_normalize, gpu_sample, raw

INF = "inf"
B = [0.1, 0.5, 1.0, INF]


def make_store(*names, interval=1.0, **kw):
    targets = tuple(Target(name=n, base_url=f"http://127.0.0.1:{i + 1}", host="127.0.0.1")
                    for i, n in enumerate(names))
    cfg = Config(targets=targets, interval_s=interval, **kw)
    return Store(cfg, normalize=fake_normalize, detect=fake_detect)


def counters(i):
    return {"generation_tokens": 100.0 * i, "prompt_tokens": 50.0 * i, "requests": 2.0 * i,
            "prefix_hits": 10.0 * i, "prefix_queries": 40.0 * i}


def feed(store, target, t0, t1, *, start=100.0, base=0, extra=None):
    """One good scrape per second from t0 to t1 inclusive; counters advance per second."""
    for t in range(t0, t1 + 1):
        i = base + t
        store.ingest(raw(target, float(t), body(
            start=start, counters=counters(i), gauges={"running": 3.0, "waiting": 1.0,
                                                        "kv_usage": 0.25},
            hists={"ttft": [B, [i, 2 * i, 2 * i, 2 * i], 0.2 * i, 2 * i]}, **(extra or {}))))
        store.commit(float(t), 1_700_000_000.0 + t)


def row_of(snap, target):
    return next(r for r in snap.engines if r.target == target)


def test_windows_constant():
    assert WINDOWS == {"10s": 10.0, "1m": 60.0, "5m": 300.0}


def test_ok_rows_rates_quantiles_lifetime():
    s = make_store("a")
    feed(s, "a", 0, 20)
    snap = s.snapshot(10.0)
    r = row_of(snap, "a")
    assert r.key == "a|m" and r.model == "m" and r.engine == "vllm"
    assert r.state == "ok" and r.last_ok_age_s == 0.0
    assert r.generation_tokens_per_s == pytest.approx(100.0)
    assert r.prompt_tokens_per_s == pytest.approx(50.0)
    assert r.requests_per_s == pytest.approx(2.0)
    assert r.prefix_hit_rate == pytest.approx(0.25)
    assert (r.running, r.waiting, r.kv_cache_usage) == (3.0, 1.0, 0.25)
    # 10 s: Δ buckets (10, 20, 20, 20): p50 rank 10 -> lowest bucket -> "<0.1"
    assert r.ttft_s.p50 == 0.1 and "p50" in r.ttft_s.below
    assert r.ttft_s.count == 20 and r.ttft_s.mean == pytest.approx(0.1)
    assert r.preemptions_per_s is None and r.errors_per_s is None  # missing stays None
    assert r.max_running is None and r.kv_capacity_tokens is None
    assert r.lifetime["requests"] == 40.0 and r.lifetime["ttft_s"].count == 40
    assert snap.time == 1_700_000_020.0 and snap.window_s == 10.0


def test_windows_differ_and_row_lookup():
    s = make_store("a")
    feed(s, "a", 0, 100)
    assert s.row("a|m", 60.0).ttft_s.count == 120
    assert s.row("a|m", 300.0).ttft_s.count == 200  # clipped to available history
    assert s.row("nope|m", 10.0) is None


def test_never_succeeded_target_has_one_row_without_model():
    s = make_store("a")
    s.ingest(raw("a", 0.0, status="down", error="connection refused"))
    s.commit(0.0, 1.0)
    [r] = s.snapshot(10.0).engines
    assert r.key == "a|" and r.model is None and r.state == "down"
    assert r.error == "connection refused" and r.last_ok_age_s is None


def test_unscraped_config_target_is_stale_without_event():
    s = make_store("a")
    s.commit(0.0, 1.0)
    [r] = s.snapshot(10.0).engines
    assert r.state == "stale"
    assert not [e for e in s.events if e.target == "a"]


@pytest.mark.parametrize(
    ("status", "http", "error", "word"),
    [
        ("down", None, "connection refused", "DOWN"),
        ("http_error", 503, "Service Unavailable", "HTTP 503"),
        ("unauthorized", 401, "check the API key", "UNAUTHORIZED (HTTP 401)"),
        ("bad_payload", 200, "HTML page", "BAD PAYLOAD"),
    ],
)
def test_failure_states_keep_last_good_values(status, http, error, word):
    s = make_store("a")
    feed(s, "a", 0, 10)
    s.ingest(raw("a", 11.0, status=status, http_status=http, error=error))
    s.commit(11.0, 1_700_000_011.0)
    r = row_of(s.snapshot(10.0), "a")
    assert r.state == status and r.error == error
    assert r.last_ok_age_s == pytest.approx(1.0)
    assert r.generation_tokens_per_s == pytest.approx(100.0)  # last good values kept
    assert r.running == 3.0
    texts = [e.text for e in s.events if e.target == "a"]
    assert texts[-1].startswith(word)
    # back to ok: recovered
    feed(s, "a", 12, 12)
    assert [e.text for e in s.events][-1].startswith("recovered (was ")
    assert row_of(s.snapshot(10.0), "a").state == "ok"


def test_parse_error_is_bad_payload_with_reason():
    s = make_store("a")
    feed(s, "a", 0, 2)
    s.ingest(raw("a", 3.0, "{truncated"))
    r = row_of(s.snapshot(10.0), "a")
    assert r.state == "bad_payload" and r.error.startswith("not JSON")
    assert r.running == 3.0


def test_unknown_format_is_bad_payload():
    s = make_store("a")
    s.ingest(raw("a", 0.0, "hello world"))
    [r] = s.snapshot(10.0).engines
    assert r.state == "bad_payload" and "no engine detected" in r.error


def test_stale_after_three_intervals_keeps_values():
    s = make_store("a", "b")
    feed(s, "a", 0, 5)
    feed(s, "b", 0, 10)  # b keeps the clock moving; a's scrapes are stuck in flight
    r = row_of(s.snapshot(10.0), "a")
    assert r.state == "stale" and r.last_ok_age_s == pytest.approx(5.0)
    assert r.generation_tokens_per_s == pytest.approx(100.0)
    assert any(e.target == "a" and e.text.startswith("STALE") for e in s.events)
    assert row_of(s.snapshot(10.0, t_mono=8.0), "a").state == "ok"  # age 3 = 3 intervals


def test_restart_by_start_time_change():
    s = make_store("a")
    feed(s, "a", 0, 10)
    # new process: start time changes, counters restart low (but we test the start_time path
    # with counters that even increase)
    feed(s, "a", 11, 11, start=500.0, base=100)
    r = row_of(s.snapshot(10.0), "a")
    assert r.state == "restarted"
    assert r.generation_tokens_per_s is None  # one sample after the restart: unknown
    assert r.ttft_s is None
    assert any("RESTARTED (process start time changed)" in e.text for e in s.events)
    assert s.needs_identity("a")
    feed(s, "a", 12, 13, start=500.0, base=100)
    r = row_of(s.snapshot(10.0), "a")
    assert r.generation_tokens_per_s == pytest.approx(100.0)  # no spike, no negative
    assert r.state == "restarted"
    feed(s, "a", 14, 25, start=500.0, base=100)
    assert row_of(s.snapshot(10.0), "a").state == "ok"


def test_restart_by_counter_decrease():
    s = make_store("a")
    feed(s, "a", 0, 10, start=None)
    feed(s, "a", 11, 13, start=None, base=-11)  # counters back to 0, 1, 2
    r = row_of(s.snapshot(10.0), "a")
    assert r.state == "restarted"
    assert r.generation_tokens_per_s == pytest.approx(100.0)
    assert r.lifetime["requests"] == 4.0
    assert any(e.text.startswith("RESTARTED (counter") for e in s.events)


def test_nan_and_inf_never_reach_rows():
    s = make_store("a")
    s.ingest(raw("a", 0.0, body(gauges={"running": 2.0, "kv_usage": "nan", "waiting": "inf"})
                 .replace('"nan"', "NaN").replace('"inf"', "Infinity")))
    [r] = s.snapshot(10.0).engines
    assert r.running == 2.0 and r.kv_cache_usage is None and r.waiting is None
    assert r.to_json()["kv_cache_usage"] is None


def test_series_gaps_not_zeros_and_alignment():
    s = make_store("a")
    feed(s, "a", 0, 3)
    s.ingest(raw("a", 4.0, status="down", error="refused"))
    s.commit(4.0, 1_700_000_004.0)
    feed(s, "a", 5, 6, base=0)
    gen = s.series("a|m", "gen_tps")
    assert len(gen) == len(s.series_times()) == 7
    assert gen[0] is None  # one sample: no rate yet
    assert gen[1] == pytest.approx(100.0)
    assert gen[4] is None  # down: a gap
    assert s.series("a|m", "running")[4] is None and s.series("a|m", "running")[5] == 3.0
    assert s.series("nope", "running") == []


def test_new_row_series_padded_to_commit_count():
    s = make_store("a", "b")
    feed(s, "a", 0, 4)
    feed(s, "b", 5, 5)
    assert len(s.series("b|m", "running")) == len(s.series("a|m", "running"))
    assert s.series("b|m", "running")[:-1] == [None] * 5


def test_events_first_seen_and_dedupe():
    s = make_store("a")
    s.ingest(raw("a", 0.0, body(version="0.33.0")))
    s.commit(0.0, 1.0)
    assert [e.text for e in s.events] == ["first seen: detected as vllm 0.33.0"]
    for t in (1.0, 2.0):
        s.ingest(raw("a", t, status="down", error="refused"))
        s.commit(t, t)
    s.event("info", "a", "probe started")
    s.event("info", "a", "probe started")
    texts = [e.text for e in s.events]
    assert texts.count("DOWN: refused") == 1 and texts.count("probe started") == 1


def test_gpus_and_gpu_error_and_series():
    s = make_store("a", "dcgm")
    s.ingest_gpus(gpu_sample(0.0, utils=(0.5, 0.9)))
    s.ingest(raw("dcgm", 0.0, body(gpus=[0.3])))
    s.commit(0.0, 1.0)
    snap = s.snapshot(10.0)
    assert [(g.host, g.index, g.source) for g in snap.gpus] == [
        ("local", 0, "nvml"), ("local", 1, "nvml"), ("127.0.0.1", 0, "dcgm")]
    assert snap.gpu_error is None
    s.ingest_gpus(gpu_sample(1.0, error="NVML library not found (no NVIDIA driver?)"))
    s.commit(1.0, 2.0)
    snap = s.snapshot(10.0)
    assert snap.gpu_error.startswith("NVML library not found")
    assert s.gpu_series("local:0", "util") == [0.5, None]
    assert s.gpu_series("local#0", "util") == [0.5, None]
    assert any(e.text.startswith("GPU unavailable: NVML") for e in s.events)
    s.ingest_gpus(gpu_sample(2.0))
    s.commit(2.0, 3.0)
    assert [e.text for e in s.events][-1] == "GPU readings back"


def test_rank_rows_and_model_order():
    from llmtop.model import EngineSample, ModelSample

    def norm(engine, text, **kw):
        t = float(text)
        return EngineSample("vllm", start_time=1.0, models=[
            ModelSample("b", counters={"requests": t}),
            ModelSample("a", counters={"requests": 2 * t}),
        ], ranks=[ModelSample("a", rank="0", counters={"requests": t}),
                  ModelSample("a", rank="1", counters={"requests": t})])

    s = Store(Config(interval_s=1.0), normalize=norm, detect=lambda *a: "vllm")
    for t in range(3):
        s.ingest(raw("x", float(t), str(t)))
        s.commit(float(t), float(t))
    snap = s.snapshot(10.0)
    assert [r.key for r in snap.engines] == ["x|b", "x|a"]
    ra = snap.engines[1]
    assert [r.key for r in ra.ranks] == ["x|a|0", "x|a|1"]
    assert ra.ranks[0].requests_per_s == pytest.approx(1.0)
    assert ra.requests_per_s == pytest.approx(2.0)
    assert ra.to_json()["ranks"][0]["rank"] == "0"
    assert s.row("x|a|1", 10.0).requests_per_s == pytest.approx(1.0)


def test_raw_families_prometheus_bodies():
    def norm(engine, text, **kw):
        from llmtop.model import EngineSample

        return EngineSample("vllm")

    s = Store(Config(), normalize=norm, detect=lambda *a: "vllm")
    assert s.raw_families("x") == ({}, {}, 0.0)
    s.ingest(raw("x", 0.0, "# TYPE foo gauge\nfoo 1\n"))
    now, prev, dt = s.raw_families("x")
    assert "foo" in now and prev == {} and dt == 0.0
    s.ingest(raw("x", 2.0, "# TYPE foo gauge\nfoo 5\n"))
    now, prev, dt = s.raw_families("x")
    assert now["foo"].samples[0].value == 5 and prev["foo"].samples[0].value == 1 and dt == 2.0
    assert s.raw_families("x")[0] is now  # cached


def test_to_json_is_finite_and_complete():
    s = make_store("a")
    feed(s, "a", 0, 5)
    d = s.snapshot(10.0).to_json("0.1.0")
    e = d["engines"][0]
    assert e["ttft_s"]["p50"] == 0.1 and e["ttft_s"]["below"]
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in e.values())


def test_history_is_bounded():
    s = make_store("a", history_s=300.0)
    feed(s, "a", 0, 2000)
    ts = s._targets["a"]
    assert len(ts.recent) <= 335 and len(ts.old) <= 31
    assert len(s.series_times()) <= 1200  # 300 s at the fastest refresh the keys offer (0.25 s)
    assert s.row("a|m", 300.0).generation_tokens_per_s == pytest.approx(100.0)


def test_same_gpu_from_two_sources_is_listed_once():
    from llmtop.model import EngineSample, GpuRecord, GpuSample

    def norm(engine, text, **kw):
        return EngineSample("triton", gpus=[GpuRecord("127.0.0.1", 0, "triton", uuid="GPU-1"),
                                            GpuRecord("127.0.0.1", 1, "triton", uuid="GPU-2")])

    s = Store(Config(), normalize=norm, detect=lambda *a: "triton")
    s.ingest_gpus(GpuSample(0.0, 0.0, gpus=[GpuRecord("", 0, "nvml", uuid="GPU-1")]))
    s.ingest(raw("t", 0.0, "x"))
    assert [(g.source, g.uuid) for g in s.snapshot(10.0).gpus] == [
        ("nvml", "GPU-1"), ("triton", "GPU-2")]


def test_sample_span_is_median_over_targets():
    s = make_store("a", "b", "c")
    assert s.sample_span_s() is None
    for name, (t0, t1) in {"a": (0.0, 1.0), "b": (0.1, 1.3), "c": (0.0, 2.0)}.items():
        s.ingest(raw(name, t0, body(counters={"requests": 1.0})))
        s.ingest(raw(name, t1, body(counters={"requests": 2.0})))
    assert s.sample_span_s() == pytest.approx(1.2)


def test_series_book_tail_reads_only_the_newest_points_with_gaps_kept():
    from llmtop.history.series import SeriesBook

    book = SeriesBook(maxlen=5)
    for i in range(7):
        book.commit(float(i), {("k", "kv"): None if i == 5 else float(i)})
    assert book.get("k", "kv") == [2.0, 3.0, 4.0, None, 6.0]  # bounded at maxlen
    assert book.get("k", "kv", last=3) == [4.0, None, 6.0]
    assert book.get("k", "kv", last=50) == [2.0, 3.0, 4.0, None, 6.0]
    assert book.get("k", "kv", last=0) == []
    assert book.get("nope", "kv", last=3) == []


def test_series_count_keeps_growing_past_the_bounded_rings():
    """Sparklines align their cells to absolute positions: the commit count, which (unlike
    the rings' length) keeps growing once old points drop; ``last`` reads only the tail."""
    s = make_store("a", history_s=300.0)
    assert s.series_count() == 0 and s.series_times(5) == []
    feed(s, "a", 0, 1299)
    assert s.series_count() == 1300
    # the ring's cap: 300 s at the fastest refresh the keys offer (0.25 s)
    assert len(s.series_times()) == len(s.series("a|m", "running")) == 1200
    assert s.series_times(3) == [1_700_001_297.0, 1_700_001_298.0, 1_700_001_299.0]
    assert s.series_times(0) == [] and s.series_times(10_000) == s.series_times()
    s.ingest_gpus(gpu_sample(1300.0, utils=(0.5,)))
    s.commit(1300.0, 1_700_001_300.0)
    assert s.series_count() == 1301
    util = s.gpu_series("local:0", "util", 2)
    assert util == [None, 0.5] and s.gpu_series("local:0", "util")[-2:] == util


def _reference_window(ts, window_s: float, t_end: float):
    """The window as first written: every kept entry, then a scan from the oldest."""
    from llmtop.history.derive import window_start

    entries = ts.entries(t_end)
    if not entries:
        return []
    times = [e.t_mono for e in entries]
    i0 = window_start(times, times[-1], window_s)
    return [e for e in entries[i0:] if e.epoch == entries[-1].epoch]


def test_window_walks_back_from_the_newest_end_with_the_same_result():
    """Thinned + full history, restarts, t_end inside or before the history: the window
    taken from the newest end equals the reference scan from the oldest."""
    import random

    from llmtop.history.rows import Entry
    from llmtop.history.target import TargetHistory
    from llmtop.model import EngineSample

    rng = random.Random(7)
    for _case in range(200):
        ts = TargetHistory(name="t", host="h")
        t, epoch = 0.0, 0
        for _ in range(rng.randint(0, 900)):
            t += rng.choice((0.5, 1.0, 1.0, 1.0, 3.0))
            if rng.random() < 0.01:
                epoch += 1
            ts.recent.append(Entry(t, t, EngineSample(engine="vllm"), epoch))
            ts.trim(t, 3600.0)
        for window_s in (0.0, 10.0, 60.0, 300.0, 600.0, 3600.0):
            t_end = t if rng.random() < 0.7 else rng.uniform(0, t + 5)
            assert ts.window(window_s, t_end) == _reference_window(ts, window_s, t_end)


def test_default_history_is_the_longest_window_plus_margin():
    # nothing on screen reads samples older than the 5 min window; keeping an hour of them
    # cost ~20 MB of RSS on the watched box
    s = make_store("a")
    feed(s, "a", 0, 1000)
    ts = s._targets["a"]
    assert len(ts.old) == 0 and len(ts.recent) <= 335
    assert s.row("a|m", 300.0).generation_tokens_per_s == pytest.approx(100.0)


def test_lifetime_values_are_worked_out_when_read_and_equal_what_derive_gives(monkeypatch):
    """Rows carry their lifetime values unworked (most rows are never read for them); reading
    gives what ``derive_lifetime`` gives, and rows of one sample compare equal unworked."""
    from llmtop.history import rows as rows_mod
    from llmtop.history.derive import derive_lifetime

    calls = []
    real = rows_mod.derive_lifetime

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(rows_mod, "derive_lifetime", counting)
    s = make_store("a")
    feed(s, "a", 0, 20)
    r = row_of(s.snapshot(10.0), "a")
    other = s.row("a|m", 60.0)  # another window, the same newest sample
    assert calls == []  # nothing read yet
    assert r.lifetime == other.lifetime and calls == []
    latest = s.latest_sample("a")
    want = derive_lifetime(latest.models[0], start_time=latest.start_time,
                           t_wall=1_700_000_020.0)
    assert dict(r.lifetime) == want and len(calls) == 1
    assert r.lifetime["requests"] == want["requests"] and len(calls) == 1  # kept
