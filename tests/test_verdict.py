"""The verdict rules, one by one, and the header line they make."""

from __future__ import annotations

import pytest

from llmtop.config import Thresholds
from llmtop.model import EngineRow, GpuRecord, Quantiles, Snapshot
from llmtop.verdict import (
    CRIT,
    OK,
    WARN,
    compute_verdict,
    growth_per_min,
    rule_errors,
    rule_gpu_throttle,
    rule_kv_pressure,
    rule_preemptions,
    rule_queue_growth,
    rule_target_state,
    rule_ttft_slo,
    short_target,
)

TH = Thresholds()


def row(**kw) -> EngineRow:
    kw.setdefault("target", "vllm@127.0.0.1:8000")
    kw.setdefault("key", kw["target"] + "|m")
    return EngineRow(**kw)


def test_short_target():
    assert short_target("vllm@127.0.0.1:8000") == "vllm@:8000"
    assert short_target("localhost:30000") == ":30000"
    assert short_target("vllm@gpu1:8000") == "vllm@gpu1:8000"


def test_target_state_rule():
    assert rule_target_state(row(), TH, {}) == []
    (f,) = rule_target_state(row(state="down"), TH, {})
    assert f.level == CRIT and f.text == "DOWN"
    (f,) = rule_target_state(row(state="http_error", http_status=503), TH, {})
    assert f.text == "HTTP 503"
    (f,) = rule_target_state(row(state="stale", last_ok_age_s=12.2), TH, {})
    assert f.level == WARN and f.text == "STALE 12s"
    assert rule_target_state(row(state="bad_payload"), TH, {})[0].text == "BAD PAYLOAD"
    assert rule_target_state(row(state="restarted"), TH, {})[0].level == WARN


def test_kv_pressure_rule():
    assert rule_kv_pressure(row(kv_cache_usage=0.5), TH, {}) == []
    assert rule_kv_pressure(row(kv_cache_usage=None), TH, {}) == []
    assert rule_kv_pressure(row(kv_cache_usage=0.92), TH, {})[0].level == WARN
    (f,) = rule_kv_pressure(row(kv_cache_usage=0.985), TH, {})
    assert f.level == CRIT and f.text == "KV 98%"


def test_queue_growth_rule():
    r = row(waiting=31)
    assert rule_queue_growth(r, TH, {}) == []
    (f,) = rule_queue_growth(r, TH, {"waiting_growth": {r.key: 12.0}})
    assert f.text == "waiting 31 (+12/min)"
    assert rule_queue_growth(r, TH, {"waiting_growth": {r.key: 1.0}}) == []
    # waiting under KV pressure is context
    assert rule_queue_growth(row(waiting=31, kv_cache_usage=0.97), TH, {})[0].text == "waiting 31"
    assert rule_queue_growth(row(waiting=0), TH, {"waiting_growth": {r.key: 99}}) == []


def test_growth_per_min():
    assert growth_per_min([None, None], 1.0) is None
    assert abs(growth_per_min([float(i + 1) for i in range(60)], 1.0) - 60.0) < 1e-6
    assert growth_per_min([5.0, None] + [5.0] * 40, 1.0) == 0.0
    # a fresh start is not a trend: fewer than half a minute of points
    assert growth_per_min([float(i + 1) for i in range(25)], 1.0) is None
    # a burst: empty moments ago, 40 waiting now
    assert growth_per_min([0.0] * 30 + [0.0, 10.0, 25.0, 40.0], 1.0) > 5.0


def test_a_queue_that_drains_is_not_growing():
    """The default demo's Triton: a small queue that comes and drains (0..8) must not read
    as queue growth, even when a least-squares line through it climbs."""
    wave = [0, 0, 1, 2, 0, 0, 1, 3, 2, 0, 0, 2, 4, 1, 0, 0, 3, 5, 2, 0] * 2
    wave += [2, 3, 4, 5, 6, 7, 8, 6, 4, 2, 0, 0, 1, 3, 5, 7, 8, 6, 4, 0]
    values = [float(v) for v in wave]
    assert growth_per_min(values, 1.0) is None
    # the same climb without draining is growth
    climbing = [float(1 + i // 4) for i in range(60)]
    assert growth_per_min(climbing, 1.0) > 5.0


def test_a_second_burst_is_growth_from_its_empty_moment():
    """The queue-spike demo at 0.5 s refreshes (llmtop 2026-11-29): a burst drained, the queue
    stayed empty, and 40 s after the first a second burst of ~100 arrived. A line through the
    whole minute falls (the first burst's drain is in it): -96/min with 135 waiting."""
    first = [127, 101, 99, 99, 92, 99, 102, 102, 101, 100, 98, 101, 98, 101, 100,
             88, 79, 63, 51, 43, 35, 24, 9, 3]
    second = [131, 100, 100, 96, 93, 99, 98, 98, 97, 98, 97]
    history = [0.0] * 10 + [float(v) for v in first] + [0.0] * 55
    # the burst has held 10+ for 5 s: measured from the empty moment before it
    g = growth_per_min(history + [float(v) for v in second], 0.5)
    assert g is not None and g > 100
    # after 4 s it is not yet a burst, and the whole minute still reads as shrinking
    assert growth_per_min(history + [float(v) for v in second[:9]], 0.5) < 0
    # the default demo's Triton: a one-refresh blip to 12 after an empty moment is no growth
    triton = [2.0, 0.0, 0.0, 1.0, 6.0, 7.0, 4.0, 1.0, 6.0, 2.0, 2.0] * 5 + [0.0, 0.0, 12.0]
    assert growth_per_min(triton, 1.0) is None or growth_per_min(triton, 1.0) < 5.0


def test_preemption_and_error_rules():
    assert rule_preemptions(row(preemptions_per_s=0.0), TH, {}) == []
    assert rule_preemptions(row(preemptions_per_s=4.0), TH, {})[0].text == "preempting 4/s"
    assert rule_errors(row(errors_per_s=None), TH, {}) == []
    assert rule_errors(row(errors_per_s=0.5), TH, {})[0].text == "errors 0.5/s"


def test_ttft_slo_rule():
    assert rule_ttft_slo(row(ttft_s=Quantiles(p95=0.4)), TH, {}) == []
    (f,) = rule_ttft_slo(row(ttft_s=Quantiles(p95=1.8)), TH, {})
    assert f.rule == "ttft_slo" and f.text == "TTFT p95 1.8s > 1.0s"
    (f,) = rule_ttft_slo(row(itl_s=Quantiles(p95=0.25)), Thresholds(itl_slo_s=0.1), {})
    assert f.rule == "itl_slo"


def test_gpu_throttle_rule():
    ok = GpuRecord(host="", index=0, source="demo", throttle=["idle"])
    hot = GpuRecord(host="", index=1, source="demo", throttle=["thermal slowdown"])
    assert rule_gpu_throttle([ok], TH) == []
    (f,) = rule_gpu_throttle([ok, hot], TH)
    assert f.text == "GPU1 thermal slowdown"


def test_verdict_lines():
    assert compute_verdict(None).text.startswith("WAITING")
    snap = Snapshot(time=0, window_s=10, engines=[row(), row(target="sglang@127.0.0.1:30000")])
    v = compute_verdict(snap, TH)
    assert v.level == OK and v.text == "OK — 2 engines healthy"
    bad = row(kv_cache_usage=0.97, waiting=31, preemptions_per_s=4.0)
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[bad]), TH)
    assert v.level == WARN
    assert v.text == "DEGRADED — vllm@:8000 KV 97% · waiting 31 · preempting 4/s"
    down = row(target="triton@127.0.0.1:8002", state="down")
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[bad, down]), TH)
    assert v.level == CRIT and v.text.startswith("CRITICAL — triton@:8002 DOWN | vllm@:8000")
    assert compute_verdict(Snapshot(time=0, window_s=10), TH).text.startswith("NO ENGINES")


# -- the rules fire on the demo scenarios (real demo engines, real Monitor; slow) --------------

SCENARIO_RULES = {
    "kv-pressure": "kv_pressure",
    "queue-spike": "queue_growth",
    "down": "target_state",
    "restart": "target_state",
}
TIME_SCALE = 3.0
"""The demo engines and the monitor share a clock 3x as fast as the wall clock
(``llmtop.clock``): queue growth's minute of history, in a third of the time."""


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [
    pytest.param(s, marks=pytest.mark.ci_step) if s == "queue-spike" else s
    for s in sorted(SCENARIO_RULES)])  # queue growth needs ~15 s of real time: ci_step tier
async def test_rules_fire_on_demo_scenarios(scenario, monkeypatch):
    from llmtop import clock
    from llmtop.config import Config
    from llmtop.demo.launcher import start_demo
    from llmtop.monitor import Monitor

    monkeypatch.setenv(clock.ENV, clock.env_value(TIME_SCALE))
    # one engine: three at 3x (a queue-spike burst is 160 requests each) starved the demo on
    # a loaded box, and its scrapes came late or not at all (STALE, DOWN: no queue seen)
    demo = start_demo(scenario=scenario, engines=["vllm"],
                      extra_args=["--fault-after", "2", "--fault-every", "60"])
    try:
        config = demo.apply(Config(discover=False, interval_s=0.5))
        mon = Monitor.from_config(config, demo=demo)
        want = SCENARIO_RULES[scenario]
        fired: set[str] = set()
        try:
            for _ in range(140):  # up to ~70 s: queue growth needs half a minute of history
                snap = await mon.tick()
                growth = {}
                for row in snap.engines:
                    g = growth_per_min(mon.store.series(row.key, "waiting"), 0.5)
                    if g is not None:
                        growth[row.key] = g
                v = compute_verdict(snap, config.thresholds, waiting_growth=growth)
                fired |= {f.rule for f in v.findings}
                if want in fired:
                    break
                await clock.sleep(0.5)
        finally:
            await mon.aclose()
        assert want in fired, (scenario, fired)
    finally:
        demo.stop()


def test_power_cap_alone_is_a_note_not_degraded():
    # a real H100 under a full matmul load (2026-11-22): 699-702 W of a 700 W limit, SM clock
    # 1290-1305 of 1980 MHz, NVML's clock-event reason "power cap" set on every sample
    busy = GpuRecord(host="", index=0, source="nvml", throttle=["power cap"], util=1.0)
    (f,) = rule_gpu_throttle([busy], TH)
    assert f.level == OK and f.text == "GPU0 power cap"
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[row()], gpus=[busy]), TH)
    assert v.level == OK and v.text == "OK — 1 engine healthy · GPU0 power cap"
    # with a real problem the note follows it, and the level is the problem's
    bad = row(kv_cache_usage=0.97)
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[bad], gpus=[busy]), TH)
    assert v.level == WARN and v.text == "DEGRADED — vllm@:8000 KV 97% | GPU0 power cap"
    # thermal or hardware slowdowns stay warnings, with the power cap named beside them
    hot = GpuRecord(host="", index=1, source="nvml", throttle=["power cap", "hw slowdown"])
    (f,) = rule_gpu_throttle([hot], TH)
    assert f.level == WARN and f.text == "GPU1 power cap, hw slowdown"
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[], gpus=[busy]), TH)
    assert v.level == OK and v.text == "NO ENGINES — nothing to monitor yet · GPU0 power cap"
    v = compute_verdict(Snapshot(time=0, window_s=10, engines=[row()], gpus=[busy, hot]), TH)
    assert v.level == WARN and v.text == "DEGRADED — GPU1 power cap, hw slowdown · GPU0 power cap"


def test_a_failed_source_is_the_verdict_not_no_engines():
    """Fleet mode: the server failing is what the header says, critical with nothing to
    show, a warning while the last good rows stay on screen."""
    problem = "UNREACHABLE: cannot reach http://127.0.0.1:9: connection refused"
    v = compute_verdict(Snapshot(time=0.0, window_s=10.0, engines=[]), source_problem=problem)
    assert v.level == CRIT and v.text == f"NO DATA — {problem}"
    assert compute_verdict(None, source_problem=problem).level == CRIT
    kept = Snapshot(time=0.0, window_s=10.0, engines=[EngineRow(key="a|m", target="a", model="m")])
    v = compute_verdict(kept, source_problem=problem)
    assert v.level == WARN and "rows from the last good refresh" in v.text
    assert compute_verdict(kept).text.startswith("OK")


def test_target_state_carries_the_engines_log_line():
    """DOWN / RESTARTED say the engine's own line that explains them (``LogSummary.cause``,
    chosen by ``history.logs``), the exception's module path cut; no cause adds nothing."""
    from llmtop.model import LogEvent, LogSummary

    def with_cause(headline: str) -> LogSummary:
        ev = LogEvent(t_wall=1.0, severity="error", lines=(headline,), headline=headline)
        return LogSummary(location=None, last_error=ev, cause=ev)

    dead = with_cause("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an "
                      "issue.")
    (f,) = rule_target_state(row(state="down", error="connection refused", log=dead), TH, {})
    assert f.level == CRIT
    assert f.text == "DOWN \u2014 log: EngineDeadError: EngineCore encountered an issue."
    oom = with_cause("torch.OutOfMemoryError: CUDA out of memory")
    (f,) = rule_target_state(row(state="restarted", log=oom), TH, {})
    assert f.text == "restarted \u2014 log: OutOfMemoryError: CUDA out of memory"
    # an error in the log that explains nothing (no cause): the state alone
    quiet = LogSummary(location=None, last_error=dead.last_error)
    (f,) = rule_target_state(row(state="down", error="connection refused", log=quiet), TH, {})
    assert f.text == "DOWN"
