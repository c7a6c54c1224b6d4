"""Each diagnosis scenario: a healthy baseline, then the change its rule looks for, seen
through llmtop's own Scraper, parsers and Store (baseline shortened to a few seconds). The
demo, in this process, and the watch share a clock ``TIME_SCALE`` times as fast as the wall
clock (``llmtop.clock``): every duration below is in its seconds."""

from __future__ import annotations

import json

import aiohttp
import pytest

from llmtop import clock
from llmtop.demo.launcher import BASELINE_ENV
from llmtop.demo.scenarios import DIAGNOSIS, SCENARIOS, baseline_seconds, get_scenario
from tests.demo.watch import Watch, watch

BASELINE_S = 5.0
AFTER_S = 5.0
SETTLE_S = 2.0
"""Left out of both windows: the start-up burst and the switch itself."""

TIME_SCALE = 2.0

pytestmark = pytest.mark.slow
REAL_TIME = pytest.mark.ci_step
"""A scenario run judges latencies the demo measured on the wall clock (2x): a demo starved
by the README command's six workers on 2 cores can miss its ratio, so these run in
``.ci/run``'s ci_step tier (three workers), not in the fast tier (docs/development.md)."""


@pytest.fixture(autouse=True)
def _fast_clock(monkeypatch):
    monkeypatch.setenv(clock.ENV, clock.env_value(TIME_SCALE))


async def _run(demo_factory, scenario: str):
    server = await demo_factory(scenario=scenario, background=True, baseline_s=BASELINE_S)
    t0 = clock.monotonic()
    w = await watch(server, BASELINE_S + AFTER_S)
    assert server.anomaly_started is not None
    t_switch = t0 + BASELINE_S

    def before(engine: str):
        return w.row(engine, t0 + SETTLE_S, t_switch)

    def after(engine: str):
        return w.row(engine, t_switch + SETTLE_S, w.times[-1])

    return server, w, before, after


def _p50(q):
    assert q is not None and q.p50 is not None, f"no p50 in this window: {q}"
    return q.p50


def _p90(q):
    assert q is not None and q.p90 is not None, f"no p90 in this window: {q}"
    return q.p90


def _mean(q):
    """The window's mean (SGLang's TTFT buckets start at 0.1 s: demo TTFTs sit below it)."""
    assert q is not None and q.mean is not None, f"no mean in this window: {q}"
    return q.mean


def _after_rows(w: Watch, engine: str) -> list:
    """The refreshes of ``engine`` after the switch and its settling (the ``after`` window)."""
    t = w.times[0] + BASELINE_S + SETTLE_S
    return [r for r, ti in zip(w.rows(engine), w.times, strict=True) if ti >= t]


def _healthy(w: Watch, *engines: str) -> None:
    """No preemption, no failure, KV with room, on these engines, all along."""
    for e in engines:
        for r in w.rows(e):
            assert r.state == "ok", (e, r.state, r.error)
            assert not r.preemptions_per_s, (e, r.preemptions_per_s)
            assert r.kv_cache_usage is not None and r.kv_cache_usage < 0.9, (e, r.kv_cache_usage)


def _no_queue(rows: list, engine: str) -> None:
    """No standing queue in these refreshes: it drained at least once (llmtop's queueing rule
    reads "all window long" as the window's smallest ``waiting``), and at most 2 waited in
    most of them. A demo starved by the other test workers lets a refresh or two catch a few
    arrivals before the next step admits them (census: 0, 0, 3, 4 after a decode slowdown)."""
    waits = sorted(r.waiting or 0 for r in rows)
    assert waits and waits[0] == 0 and waits[len(waits) // 2] <= 2, (engine, waits)


def test_every_rule_has_a_scenario():
    assert set(DIAGNOSIS.values()) >= {
        "queueing", "kv_pressure", "prefix_cache_miss", "long_prompts", "decode_slowdown",
        "gpu_throttle", "errors", "imbalance", "spec_decode_drop", "warming_up",
        "gpu_bound", "gpu_idle"}
    for name, sc in SCENARIOS.items():
        if name in DIAGNOSIS and name not in ("kv-pressure", "restart"):
            assert sc.baseline_s >= 20 and baseline_seconds(sc) == sc.baseline_s, name


def test_baseline_from_the_environment(monkeypatch):
    sc = get_scenario("errors")
    monkeypatch.setenv(BASELINE_ENV, "2.5")
    assert baseline_seconds(sc) == 2.5 and baseline_seconds(sc, 7) == 7.0
    assert baseline_seconds(get_scenario(None)) == 0.0  # no anomaly phase: no baseline
    monkeypatch.setenv(BASELINE_ENV, "soon")
    assert baseline_seconds(sc) == sc.baseline_s


def _ttft_rise(before, after) -> dict[str, float]:
    """TTFT after / before: vLLM's median (its buckets resolve the demo's TTFTs, and a stall
    of the starved worker moves it least), SGLang's mean (its buckets start at 0.1 s)."""
    return {"vllm": _p50(after("vllm").ttft_s) / _p50(before("vllm").ttft_s),
            "sglang": _mean(after("sglang").ttft_s) / _mean(before("sglang").ttft_s)}


@REAL_TIME
async def test_long_prompts(demo_factory):
    _server, w, before, after = await _run(demo_factory, "long-prompts")
    rise = _ttft_rise(before, after)
    if min(rise.values()) < 1.3:
        # TTFT against the wall clock in a worker starved by five others and a busy loop:
        # vLLM's mean rose 1.30x, its median 1.55x (census run 54; alone 1.7-2.4x). The
        # scenario runs once more; a demo whose prefill costs nothing fails both times
        _server, w, before, after = await _run(demo_factory, "long-prompts")
        rise = _ttft_rise(before, after)
    assert min(rise.values()) >= 1.3, rise
    for e in ("vllm", "sglang"):
        b, a = before(e), after(e)
        assert _p50(a.prompt_len) >= 2.0 * _p50(b.prompt_len), (e, b.prompt_len, a.prompt_len)
        hits = (b.prefix_hit_rate, a.prefix_hit_rate)
        assert hits[0] and hits[1], (e, hits)
        assert abs(hits[1] - hits[0]) <= 0.2, (e, hits)  # the hit rate holds
    prefill = (before("vllm").prefill_s, after("vllm").prefill_s)
    assert _p50(prefill[0]) <= _p50(prefill[1]), prefill
    _healthy(w, "vllm", "sglang", "triton")


@REAL_TIME
async def test_decode_slowdown(demo_factory):
    _server, w, before, after = await _run(demo_factory, "decode-slowdown")
    for e in ("vllm", "sglang"):
        b, a = before(e), after(e)
        assert _p50(a.itl_s) >= 1.8 * _p50(b.itl_s), e
        assert _mean(a.prompt_len) <= 1.6 * _mean(b.prompt_len), e  # few requests: the mean
        _no_queue(_after_rows(w, e), e)
    _healthy(w, "vllm", "sglang", "triton")


@REAL_TIME
async def test_gpu_throttle(demo_factory):
    server, w, before, after = await _run(demo_factory, "gpu-throttle")
    v, g = (next(es.target for es in server.sites if es.kind == k) for k in ("vllm", "sglang"))
    gpus = {p.engine_target: gpu for gpu in w.snaps[-1].gpus for p in gpu.processes}
    hot = gpus[v]
    assert {"hw slowdown", "hw thermal slowdown"} <= set(hot.throttle)
    assert hot.sm_clock_mhz <= 0.8 * hot.sm_clock_max_mhz
    assert hot.temp_c > hot.temp_slowdown_c
    assert not {"hw slowdown", "hw thermal slowdown"} & set(gpus[g].throttle)
    assert gpus[g].sm_clock_mhz >= 0.85 * gpus[g].sm_clock_max_mhz
    assert _p50(after("vllm").itl_s) >= 1.4 * _p50(before("vllm").itl_s)
    assert _mean(after("vllm").itl_s) >= 1.6 * _mean(before("vllm").itl_s)
    assert _mean(after("sglang").itl_s) <= 1.25 * _mean(before("sglang").itl_s)
    _healthy(w, "vllm", "sglang", "triton")


@REAL_TIME
async def test_errors(demo_factory):
    _server, _w, before, after = await _run(demo_factory, "errors")
    b, a = before("vllm"), after("vllm")
    assert not (b.finished or {}).get("error")
    fin = a.finished or {}
    assert fin.get("error", 0) >= 2 and fin["error"] / sum(fin.values()) >= 0.03, fin
    assert after("triton").errors_per_s and not before("triton").errors_per_s
    assert not after("sglang").errors_per_s


async def test_errors_reach_the_api(demo_factory):
    """A failed request answers 500 (non-streaming) or ends with an error event."""
    server = await demo_factory(("vllm",))
    server.sites[0].engine.error_share = 1.0
    base = server.sites[0].base_url
    async with aiohttp.ClientSession() as s:
        async with s.post(base + "/v1/completions", json={"prompt": "a b", "max_tokens": 4}) as r:
            assert r.status == 500
            assert (await r.json())["type"] == "InternalServerError"
        body = {"prompt": "a b", "max_tokens": 8, "stream": True, "ignore_eos": True}
        async with s.post(base + "/v1/completions", json=body) as r:
            assert r.status == 200
            events = [e[6:] for e in (await r.text()).split("\n\n") if e]
    assert events[-1] == "[DONE]"
    err = json.loads(events[-2])
    assert err["error"]["code"] == 500 and err["error"]["type"] == "InternalServerError"
    chunks = [json.loads(e) for e in events[:-2]]
    assert chunks and all(c["choices"][0]["finish_reason"] is None for c in chunks)


@REAL_TIME
async def test_imbalance(demo_factory):
    _server, w, before, _after = await _run(demo_factory, "imbalance")
    bv, bs = before("vllm"), before("sglang")
    assert bv.model == bs.model  # two replicas of one model
    av, as_ = w.rows("vllm")[-1], w.rows("sglang")[-1]
    assert bv.running and bs.running and bv.running <= 1.6 * bs.running
    assert av.running >= 3 * as_.running and av.running - as_.running >= 8
    assert av.kv_cache_usage - as_.kv_cache_usage >= 0.3
    _healthy(w, "vllm", "sglang")


@REAL_TIME
async def test_queueing(demo_factory):
    _server, w, _before, after = await _run(demo_factory, "queueing")
    for e, limit in (("vllm", 64), ("sglang", 48)):
        _no_queue(w.rows(e)[2:8], e)
        tail = w.rows(e)[-4:]
        assert all((r.waiting or 0) >= 5 and r.running == limit for r in tail), e
    a = after("vllm")
    assert _p50(a.queue_s) >= 0.5 * _p50(a.ttft_s)
    _healthy(w, "vllm", "sglang", "triton")


@REAL_TIME
async def test_prefix_miss(demo_factory):
    _server, w, before, after = await _run(demo_factory, "prefix-miss")
    for e in ("vllm", "sglang"):
        b, a = before(e), after(e)
        assert b.prefix_hit_rate and b.prefix_hit_rate >= 0.5, e
        assert a.prefix_hit_rate is not None and a.prefix_hit_rate <= 0.1, e
        # same prompt lengths: the mix is 60 % 1024-token prefix + 50-300 words, 40 % 50-300
        # words, so a window of ~35 requests has a p50 that jumps between the modes and a
        # mean that moves with their share (SGLang's 909 -> 581 tokens, census run 56: p50
        # 1147 -> 261, p90 1429 -> 1368); the p90 is the long mode's
        assert 0.65 <= _p90(a.prompt_len) / _p90(b.prompt_len) <= 1.5, e
        assert _mean(a.ttft_s) >= 1.2 * _mean(b.ttft_s), e
    _healthy(w, "vllm", "sglang", "triton")


@REAL_TIME
async def test_spec_decode_drop(demo_factory):
    _server, w, before, after = await _run(demo_factory, "spec-decode-drop")
    for e in ("vllm", "sglang"):  # vLLM: Δaccepted/Δdrafted; SGLang: its gauge
        b, a = before(e), after(e)
        assert b.spec_accept_rate is not None and abs(b.spec_accept_rate - 0.72) <= 0.1, e
        assert a.spec_accept_rate is not None and abs(a.spec_accept_rate - 0.22) <= 0.1, e
        assert _mean(a.itl_s) >= 1.5 * _mean(b.itl_s), e
    assert after("triton").spec_accept_rate is None  # no speculative decoding there
    _healthy(w, "vllm", "sglang", "triton")


def _gpu_side(server, w: Watch, rule: str, kind: str):
    """The engine's GPU's last record, its after-window rows, and the diagnosis of the after
    window (the queue all window long is the pressure: no baseline needed)."""
    from llmtop.diagnose import diagnose

    t = next(es.target for es in server.sites if es.kind == kind)
    gpu = next(g for g in w.snaps[-1].gpus for p in g.processes if p.engine_target == t)
    rows = _after_rows(w, kind)
    wmin = min(r.waiting or 0 for r in rows[2:])
    row = w.row(kind, w.times[0] + BASELINE_S + SETTLE_S, w.times[-1])
    found = [f for f in diagnose([row], gpus=w.snaps[-1].gpus, waiting_min={row.key: wmin})
             if f.target == t]
    assert found and found[0].rule == rule, (kind, [(f.rule, f.summary) for f in found])
    return gpu, rows


@REAL_TIME
async def test_gpu_bound(demo_factory):
    """Long decodes past vLLM's 64 and SGLang's 48 seats on a decode-tuned H100: the batch's
    KV and the weights move most of the peak bandwidth while a queue grows."""
    server, w, _before, _after = await _run(demo_factory, "gpu-bound")
    for kind, seats in (("vllm", 64), ("sglang", 48)):
        _no_queue(w.rows(kind)[2:8], kind)
        gpu, rows = _gpu_side(server, w, "gpu_bound", kind)
        assert all((r.waiting or 0) >= 5 and r.running == seats for r in rows[-4:]), kind
        assert gpu.activity_source == "demo" and gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.dram_active is not None and gpu.dram_active >= 0.7, gpu
        assert gpu.sm_active is not None and gpu.sm_active >= 0.7, gpu
    _healthy(w, "vllm", "sglang")


@REAL_TIME
async def test_gpu_idle(demo_factory):
    """vLLM and SGLang with 4 seats, host-bound steps: a queue grows while SM activity and
    DRAM activity stay low (NVML's util is busy time and reads higher)."""
    server, w, _before, _after = await _run(demo_factory, "gpu-idle")
    for kind in ("vllm", "sglang"):
        _no_queue(w.rows(kind)[2:8], kind)
        gpu, rows = _gpu_side(server, w, "gpu_idle", kind)
        assert all((r.waiting or 0) >= 5 and r.running == 4 for r in rows[-4:]), kind
        assert gpu.sm_active is not None and gpu.sm_active < 0.5, gpu
        assert gpu.dram_active is not None and gpu.dram_active < 0.3, gpu
        assert gpu.util is not None and gpu.util > gpu.sm_active
    _healthy(w, "vllm", "sglang")
