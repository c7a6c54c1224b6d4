"""Each rule: fires on its cause (with its numbers in the summary), stays quiet on a healthy
row, and says nothing when its signals are missing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmtop.diagnose import diagnose
from llmtop.diagnose.baseline import Baseline
from llmtop.model import EngineRow
from tests.diagnose.rows import T, base, gpu, healthy, q


def run(row: EngineRow, b: Baseline | None = None, **kw):
    return diagnose([row], baselines={row.key: b} if b is not None else {}, **kw)


def rules(findings) -> list[str]:
    return [f.rule for f in findings]


def test_healthy_row_has_no_findings_with_or_without_baseline():
    assert run(healthy(), base()) == []
    assert run(healthy()) == []
    assert run(healthy(), base(), gpus=[gpu(throttle=["power cap"], clock=1290)]) == []


def test_missing_signals_do_not_apply():
    bare = EngineRow(key=f"{T}|llama", target=T, engine="vllm", model="llama", state="ok")
    assert run(bare, base()) == []
    # a row that is down is the verdict's business, not the diagnosis'
    assert run(healthy(state="down", waiting=50.0, kv_cache_usage=1.0), base()) == []


# ---------------------------------------------------------------- kv_pressure
def test_kv_pressure_fires_on_full_cache_with_preemptions():
    r = healthy(kv_cache_usage=0.99, waiting=31.0, preemptions_per_s=2.5)
    f = run(r, base())[0]
    assert (f.rule, f.severity, f.target, f.model) == ("kv_pressure", "critical", T, "llama")
    assert "99 %" in f.summary and "2.5 preemptions/s" in f.summary and "31 waiting" in f.summary
    assert "--gpu-memory-utilization" in f.action
    assert {e.signal for e in f.evidence} >= {"kv", "preemptions_per_s", "waiting"}


def test_kv_pressure_warns_on_full_cache_and_queue_without_preemption():
    f = run(healthy(kv_cache_usage=0.96, waiting=4.0), base())
    assert rules(f) == ["kv_pressure"] and f[0].severity == "warn"


def test_full_kv_without_queue_or_preemption_is_a_healthy_full_cache():
    assert run(healthy(kv_cache_usage=0.97), base()) == []
    # one preemption in 30 s is below the event floor
    assert run(healthy(kv_cache_usage=0.9, preemptions_per_s=1 / 30), base()) == []


def test_sglang_kv_pressure_names_retractions_and_its_own_flag():
    r = healthy(engine="sglang", kv_cache_usage=0.97, waiting=12.0, preemptions_per_s=0.2)
    f = run(r, base())[0]
    assert "retractions" in f.summary and "--schedule-conservativeness" in f.action


# ---------------------------------------------------------------- queueing
def queued(**kw):
    kw = {"waiting": 25.0, "running": 8.0, "max_running": 8.0, "kv_cache_usage": 0.62,
          "queue_s": q(2.4, 3.1, 60), "ttft_s": q(2.5, 3.2, 60), **kw}
    return healthy(**kw)


def test_queueing_fires_when_queue_dominates_ttft_at_the_running_limit():
    f = run(queued(), base(), waiting_min={f"{T}|llama": 20.0})
    assert rules(f) == ["queueing"]
    f0 = f[0]
    assert f0.severity == "critical"
    assert "TTFT p95 3.2 s" in f0.summary and "25 requests wait" in f0.summary
    assert "pinned at 8" in f0.summary and "62 %" in f0.summary
    assert "--max-num-seqs" in f0.action


def test_a_deferred_queue_is_named_as_deferred_not_as_load():
    """vLLM 0.13+ says why requests wait (``num_requests_waiting_by_reason``): most of them
    deferred (LoRA budget, KV transfer, blocked) is not a capacity problem."""
    f = run(queued(waiting_deferred=20.0), base(), waiting_min={f"{T}|llama": 20.0})
    assert rules(f) == ["queueing"]
    assert "20 of the 25 are deferred" in f[0].summary and "--max-loras" in f[0].action
    assert "--max-num-seqs will not drain it" in f[0].action
    assert any(e.signal == "waiting_deferred" and e.value == 20.0 and e.window == "now"
               for e in f[0].evidence)
    for few in (0.0, 5.0, None):  # waiting for capacity (or not said): the usual action
        g = run(queued(waiting_deferred=few), base(), waiting_min={f"{T}|llama": 20.0})[0]
        assert "deferred" not in g.summary and "raise --max-num-seqs" in g.action


def test_a_queue_in_bursts_is_named_from_the_queue_time_histograms():
    """The queue drained to 0 for moments, but 60 requests finished and their queue time is
    96 % of TTFT: that is queueing in bursts, not an unexplained TTFT rise (seen on the real
    vLLM: 98 % of TTFT over 130 requests, and llmtop said ``ttft_rise``)."""
    for now, wmin in ((25.0, 0.0), (0.0, 0.0), (0.0, None)):
        f = run(queued(waiting=now), base(), waiting_min={f"{T}|llama": wmin})
        assert rules(f) == ["queueing"], (now, wmin)
        assert f[0].severity == "critical"  # p95 3.1 s, 96 % of TTFT: as a steady queue
        assert "the queue comes in bursts: it drained to 0 waiting " in f[0].summary
        assert ("or is building up" in f[0].summary) == (now > 0)
        assert "over the 60 requests that finished queue time (mean 2.4 s, p95 3.1 s) is " \
               "96 % of TTFT's mean" in f[0].summary
        ev = {e.signal: e.value for e in f[0].evidence}
        assert ev["requests"] == 60 and ev["queue_share_of_ttft"] == pytest.approx(0.96)


def test_a_drained_queue_needs_the_histograms_to_say_so():
    key = {f"{T}|llama": 0.0}
    # a small share of TTFT: prefill is what takes the time, and TTFT's rise is unexplained
    small = queued(queue_s=q(0.6, 0.9, 60), ttft_s=q(2.5, 3.2, 60))
    assert rules(run(small, base(), waiting_min=key)) == ["ttft_rise"]
    # a short queue, if most of a short TTFT: below the 0.5 s floor (the real vLLM at 9 req/s
    # of 128 tokens on --max-num-seqs 2: queue mean ~0.12 s, 95 % of TTFT, nothing to act on)
    assert run(queued(queue_s=q(0.1, 0.28, 60), ttft_s=q(0.11, 0.3, 60)), base(),
               waiting_min=key) == []
    # too few finished to trust the share: a waiting gauge that touched 0 is not enough
    few = queued(queue_s=q(2.4, 3.1, 8), ttft_s=q(2.5, 3.2, 8), inference_s=q(0.5, 0.6, 8))
    assert run(few, base(), waiting_min=key) == []
    # no TTFT and no request time: no share, so no bursts
    assert run(queued(ttft_s=None, e2e_s=None), base(), waiting_min=key) == []


def test_mild_queue_is_not_queueing():
    # a few waiting, queue time in vLLM's lowest bucket: healthy and busy
    r = healthy(waiting=2.0, queue_s=q(0.1, 0.28, 60))
    assert run(r, base(), waiting_min={f"{T}|llama": 1.0}) == []


def test_queueing_needs_enough_requests():
    assert run(queued(queue_s=q(2.4, 3.1, 8), ttft_s=q(2.5, 3.2, 8)), base()) == []


def test_queue_as_usual_is_info():
    f = run(queued(queue_s=q(0.9, 1.2, 60), ttft_s=q(1.0, 1.3, 60)), base(queue_p95=1.0))
    assert rules(f) == ["queueing"] and f[0].severity == "info"


def test_queueing_without_queue_histogram_needs_a_long_sustained_queue():
    r = queued(queue_s=None, ttft_s=q(0.12, 0.35, 60))
    assert run(r, base()) == []  # waiting_min unknown
    assert rules(run(r, base(), waiting_min={r.key: 12.0})) == ["queueing"]
    # a long queue now that dipped for a moment (a real llama-server's deferred gauge: 9,
    # with one-sample dips to 2-4) is still a queue; one that drained to 0, or is short now,
    # is not
    f = run(r, base(), waiting_min={r.key: 2.0})
    assert rules(f) == ["queueing"] and "never fewer than 2 in the window" in f[0].summary
    assert run(r, base(), waiting_min={r.key: 0.0}) == []
    assert run(replace(r, waiting=4.0), base(), waiting_min={r.key: 3.0}) == []


# ---------------------------------------------------------------- long_prompts
def test_long_prompts_fires_when_prompts_and_prefill_grow():
    r = healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=q(0.9, 1.8, 60),
                ttft_s=q(1.0, 2.0, 60))
    f = run(r, base())
    assert rules(f) == ["long_prompts"]
    assert f[0].severity == "warn" and "3200 tokens" in f[0].summary
    assert "prefill p95 1.8 s" in f[0].summary


def test_longer_prompts_with_latency_unchanged_are_info():
    f = run(healthy(prompt_len=q(3200, 7000, 60, p90=6000)), base())
    assert rules(f) == ["long_prompts"] and f[0].severity == "info"


def test_small_prompt_change_is_not_long_prompts():
    assert run(healthy(prompt_len=q(500, 1000, 60, p90=800)), base()) == []
    # doubled, but only +60 tokens: below the absolute floor
    assert run(healthy(prompt_len=q(120, 200, 60, p90=150)), base(prompt_p50=60,
                                                                  prompt_p90=100)) == []


# ---------------------------------------------------------------- prefix_cache_miss
def test_prefix_cache_miss_fires_when_hit_rate_collapses():
    r = healthy(prefix_hit_rate=0.08, prefill_s=q(0.4, 0.9, 60), ttft_s=q(0.5, 1.1, 60))
    f = run(r, base())
    assert rules(f) == ["prefix_cache_miss"]
    assert "8 %" in f[0].summary and "62 %" in f[0].summary and "prompts unchanged" in f[0].summary


def test_small_hit_rate_dip_or_no_reuse_is_quiet():
    assert run(healthy(prefix_hit_rate=0.5), base()) == []
    assert run(healthy(prefix_hit_rate=0.02), base(hit_rate=0.1)) == []  # never reused much


def test_prefix_cache_miss_after_restart_is_warming_up():
    r = healthy(prefix_hit_rate=0.05)
    f = run(r, base(), restarted_ago_s={T: 30.0})
    assert rules(f) == ["warming_up"] and f[0].severity == "info"
    assert "restarted 30 s ago" in f[0].summary


# ---------------------------------------------------------------- decode_slowdown
def test_decode_slowdown_fires_when_itl_rises_with_batch_unchanged():
    f = run(healthy(itl_s=q(0.075, 0.1, 6000)), base())
    assert rules(f) == ["decode_slowdown"] and f[0].severity == "warn"
    assert "ITL p50 75 ms" in f[0].summary
    assert rules(run(healthy(itl_s=q(0.12, 0.15, 6000)), base()))[0] == "decode_slowdown"
    assert run(healthy(itl_s=q(0.12, 0.15, 6000)), base())[0].severity == "critical"


def test_decode_slower_with_a_bigger_batch_is_load():
    assert run(healthy(itl_s=q(0.075, 0.1, 6000), running=40.0), base()) == []


def test_decode_slowdown_needs_baseline_and_tokens():
    assert run(healthy(itl_s=q(0.075, 0.1, 6000))) == []
    assert run(healthy(itl_s=q(0.075, 0.1, 50), tpot_s=q(0.031, 0.04, 5)), base()) == []


# ---------------------------------------------------------------- gpu_throttle
def test_gpu_throttle_on_hw_slowdown_of_the_engines_gpu():
    f = run(healthy(), base(), gpus=[gpu(throttle=["hw thermal slowdown"], clock=1100)])
    assert rules(f) == ["gpu_throttle"] and f[0].severity == "critical"
    assert "GPU0 hw thermal slowdown" in f[0].summary and "1100 MHz" in f[0].summary


def test_gpu_throttle_ignores_gpus_of_other_engines_and_a_normal_power_cap():
    other = gpu(throttle=["hw slowdown"], clock=900, target="sglang@127.0.0.1:30000")
    assert run(healthy(), base(), gpus=[other]) == []
    # power cap at 65 % of max clock is a busy H100's normal state: no baseline, no finding
    assert run(healthy(), base(), gpus=[gpu(throttle=["power cap"], clock=1290)]) == []


def test_power_cap_with_clock_far_below_usual_is_throttling():
    g = gpu(throttle=["power cap"], clock=900)
    gb = {"ignored": Baseline({}, 0, 0)}
    gb = {":0": Baseline({"sm_clock": 1300.0, "util": 0.9}, 30, 290.0)}
    f = run(healthy(), base(), gpus=[g], gpu_baselines=gb)
    assert rules(f) == ["gpu_throttle"] and f[0].severity == "warn"


# ---------------------------------------------------------------- errors and aborts
def test_errors_fire_above_a_few_percent_with_enough_requests():
    f = run(healthy(finished={"stop": 50.0, "error": 10.0}), base())
    assert rules(f) == ["errors"] and f[0].severity == "warn"
    assert "17 % of requests fail (10 of 60 in 30s)" in f[0].summary
    f = run(healthy(finished={"stop": 30.0, "error": 30.0}), base())
    assert f[0].severity == "critical"


def test_errors_need_enough_events():
    assert run(healthy(finished={"stop": 60.0, "error": 1.0}), base()) == []
    assert run(healthy(finished={"stop": 5.0, "error": 5.0}), base()) == []


def test_errors_from_rates_when_no_finish_reasons():
    r = healthy(finished=None, requests_per_s=2.0, errors_per_s=0.5)
    assert rules(run(r, base())) == ["errors"]


def test_aborts_are_info_not_errors():
    f = run(healthy(finished={"stop": 40.0, "abort": 20.0}), base())
    assert rules(f) == ["aborts"] and f[0].severity == "info"


# ---------------------------------------------------------------- imbalance
def test_imbalance_names_the_overloaded_replica():
    a = healthy("vllm@10.0.0.1:8000", waiting=12.0, running=8.0)
    b = healthy("vllm@10.0.0.2:8000", waiting=0.0, running=2.0)
    f = diagnose([a, b], waiting_min={a.key: 12.0, b.key: 0.0})  # 12 waiting all window
    assert [(x.rule, x.target) for x in f] == [("imbalance", "vllm@10.0.0.1:8000")]
    assert "overloaded: 12 waiting, KV 45 %, while its sibling vllm@10.0.0.2:8000 is idle" \
        in f[0].summary
    # 12 waiting in one refresh, or in a window that had them only for a moment: no finding
    # (a demo's first scrape caught vLLM admitting its start-up burst beside an idle SGLang)
    assert diagnose([a, b]) == []
    assert diagnose([a, b], waiting_min={a.key: 0.0, b.key: 0.0}) == []


def test_equal_replicas_and_other_models_are_not_imbalanced():
    a = healthy("vllm@10.0.0.1:8000", waiting=1.0)
    b = healthy("vllm@10.0.0.2:8000", waiting=0.0)
    c = healthy("vllm@10.0.0.3:8000", model="other", waiting=30.0, running=30.0)
    assert diagnose([a, b, c]) == []


def test_imbalance_across_data_parallel_ranks():
    r = healthy(waiting=9.0)
    r.ranks = [healthy(rank="0", key=f"{T}|llama|0", waiting=9.0, running=8.0),
               healthy(rank="1", key=f"{T}|llama|1", waiting=0.0, running=1.0)]
    f = run(r, base(), waiting_min={r.key: 9.0})  # the engine queued all window
    assert rules(f) == ["imbalance"] and "rank 0" in f[0].summary
    assert run(r, base()) == [] and run(r, base(), waiting_min={r.key: 0.0}) == []


# ---------------------------------------------------------------- spec decode, ttft_rise
def test_spec_decode_drop():
    f = run(healthy(spec_accept_rate=0.3), base(spec_accept=0.72))
    assert rules(f) == ["spec_decode_drop"]
    assert run(healthy(spec_accept_rate=0.65), base(spec_accept=0.72)) == []


def test_unexplained_ttft_rise_is_reported_explained_one_is_not():
    r = healthy(ttft_s=q(0.5, 1.4, 60))
    assert rules(run(r, base())) == ["ttft_rise"]
    r2 = replace(r, prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=q(0.9, 1.3, 60))
    assert rules(run(r2, base())) == ["long_prompts"]


@pytest.mark.parametrize("window", [10.0, 30.0, 60.0])
def test_evidence_names_the_window(window):
    f = run(healthy(kv_cache_usage=0.99, waiting=31.0, preemptions_per_s=2.5), base(),
            window_s=window)
    labels = {e.signal: e.window for e in f[0].evidence}
    assert labels["preemptions_per_s"] == ("10s" if window == 10 else "30s" if window == 30
                                           else "1m")
    assert labels["kv"] == labels["waiting"] == "now"  # gauges: the newest sample


def test_queueing_on_a_mean_only_queue_counter_triton():
    from llmtop.model import Quantiles

    r = healthy("triton@127.0.0.1:8002", engine="triton", model="tensorrt_llm",
                waiting=12.0, running=32.0, max_running=32.0, kv_cache_usage=0.5,
                queue_s=Quantiles(mean=1.2, count=60.0), ttft_s=q(1.3, 2.0, 60),
                prefix_hit_rate=None, prefill_s=None)
    f = run(r, None, waiting_min={r.key: 8.0})
    assert rules(f) == ["queueing"] and f[0].severity == "warn"
    assert "queue time (mean 1.2 s)" in f[0].summary and "pinned at 32" in f[0].summary
    assert "raise the running limit" in f[0].action


def test_triton_queue_share_is_of_the_request_time_without_ttft():
    """A non-streaming Triton model has no TTFT: the queue's share is of the whole request's
    mean time (``nv_inference_request_duration_us`` holds the queue)."""
    from llmtop.model import Quantiles

    def row(queue: float, e2e: float, waiting: float = 40.0):
        return healthy("triton@127.0.0.1:8002", engine="triton", model="sleepy",
                       waiting=waiting, running=None, max_running=None, kv_cache_usage=None,
                       queue_s=Quantiles(mean=queue, count=300.0), ttft_s=None,
                       e2e_s=Quantiles(mean=e2e, count=300.0), prefix_hit_rate=None,
                       prefill_s=None)

    r = row(0.75, 0.8)
    f = run(r, None, waiting_min={r.key: 30.0})
    assert rules(f) == ["queueing"]
    assert "queue time (mean 750 ms) is 94 % of the request time's mean" in f[0].summary
    ev = {e.signal: e.value for e in f[0].evidence}
    assert ev["queue_share_of_e2e"] == pytest.approx(0.9375) and ev["e2e_mean"] == 0.8
    # the queue a small share of a long request: the model is slow, not the admission
    slow = row(0.6, 3.0)
    assert run(slow, None, waiting_min={slow.key: 30.0}) == []
    # drained for moments: still named from the counters' share
    assert rules(run(r, None, waiting_min={r.key: 0.0})) == ["queueing"]
