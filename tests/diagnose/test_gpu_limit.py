"""``gpu_bound`` / ``gpu_idle``: under a queue or a latency rise, the GPU at its limit (memory
bandwidth or compute) is told apart from an engine that leaves it idle; each with its own
action and its numbers; a healthy engine, a middle reading and missing data make no claim."""

from __future__ import annotations

from dataclasses import replace

from llmtop.diagnose import diagnose
from llmtop.diagnose.baseline import Baseline
from llmtop.diagnose.context import RowCtx
from llmtop.diagnose.rules.gpu_limit import gpu_limit, gpu_mean
from llmtop.model import GpuRecord
from tests.diagnose.rows import T, base, gpu, healthy, q

PEAK = {"bytes_per_s": 3.35e12, "flops": 989e12, "gpu": "NVIDIA H100 80GB HBM3",
        "source": "NVIDIA H100 SXM datasheet"}


def active(**kw: float | None) -> GpuRecord:
    """The engine's H100 with GPM activity (0..1)."""
    return replace(gpu(), activity_source="gpm", **kw)


def queued(**kw):
    """A vLLM row with 12 waiting all window long (the caller passes waiting_min)."""
    kw = {"queue_s": q(2.0, 4.0, 60), "ttft_s": q(2.2, 4.3, 60), **kw}
    return healthy(waiting=12.0, **kw)


def ctx(row, gpus=(), waiting_min: float | None = 10.0, b: Baseline | None = None) -> RowCtx:
    return RowCtx(row=row, base=b if b is not None else base(), window_s=30.0,
                  waiting_min=waiting_min, gpus=list(gpus))


def one(c: RowCtx):
    found = gpu_limit(c)
    assert len(found) == 1, found
    return found[0]


def test_memory_bound_decode_names_the_gpu_with_its_bandwidth():
    row = queued(running=48.0, max_running=64.0, mbu=0.82, achieved_bytes_per_s=2.75e12,
                 gpu_peak=PEAK)
    f = one(ctx(row, [active(dram_active=0.86, sm_active=0.9, tensor_active=0.12)]))
    assert f.rule == "gpu_bound" and f.severity == "warn"
    assert "memory bandwidth" in f.summary and "2.75GB/s" not in f.summary
    assert "it moves 2.75TB/s of 3.35TB/s per GPU (MBU 82 %)" in f.summary
    assert "DRAM busy 86 %" in f.summary and "12 requests wait" in f.summary
    assert "FP8" in f.action and "helps little" in f.action
    ev = {e.signal: e for e in f.evidence}
    assert ev["mbu"].value == 0.82 and ev["mbu"].threshold == 0.6
    assert ev["gpu.dram_active"].value == 0.86 and "mfu" not in ev  # not reported: no evidence


def test_dram_activity_alone_is_enough_where_the_engine_exports_no_counters():
    f = one(ctx(queued(running=40.0), [active(dram_active=0.7, sm_active=0.8)]))
    assert f.rule == "gpu_bound" and "MBU" not in f.summary and "DRAM busy 70 %" in f.summary


def test_compute_bound_prefill_after_a_ttft_rise():
    row = healthy(ttft_s=q(0.6, 1.4, 60), mfu=0.52)
    f = one(ctx(row, [active(tensor_active=0.74, sm_active=0.95, dram_active=0.3)],
                waiting_min=0.0))
    assert f.rule == "gpu_bound" and "compute (prefill)" in f.summary
    assert "TTFT p95 1.4 s (usual 350 ms)" in f.summary
    assert "MFU 52 %" in f.summary and "tensor cores busy 74 %" in f.summary
    assert "--max-num-batched-tokens" in f.action


def test_a_small_batch_at_high_mbu_asks_for_seats_first():
    row = queued(running=2.0, max_running=2.0, kv_cache_usage=0.1, mbu=0.66)
    f = one(ctx(row, [active(dram_active=0.7, sm_active=0.4)]))
    assert f.rule == "gpu_bound" and "a batch of only 2 it reads all the weights for 2 tokens" \
        in f.summary and f.summary.startswith("each step is bound by the GPU's memory")
    assert f.action.startswith("raise --max-num-seqs first")
    one_seat = one(ctx(replace(row, running=1.0, max_running=1.0), [active(dram_active=0.62)]))
    assert "for 1 token: more seats" in one_seat.summary


def test_seat_limit_leaves_the_gpu_idle():
    row = queued(running=8.0, max_running=8.0, kv_cache_usage=0.3, mbu=0.12)
    f = one(ctx(row, [active(sm_active=0.22, dram_active=0.14, tensor_active=0.02)]))
    assert f.rule == "gpu_idle"
    assert "SM activity 22 %, MBU 12 %, DRAM busy 14 %" in f.summary
    assert "limit of 8, KV 30 %: the seats, not the GPU" in f.summary
    assert f.action.startswith("raise --max-num-seqs")
    assert {e.signal for e in f.evidence} >= {"gpu.sm_active", "mbu", "running", "waiting"}


def test_host_side_leaves_the_gpu_idle_below_the_seat_limit():
    row = queued(running=20.0, max_running=64.0, kv_cache_usage=0.4)
    f = one(ctx(row, [active(sm_active=0.18, dram_active=0.1)]))
    assert f.rule == "gpu_idle" and "20 running" in f.summary and "CPU side" in f.summary
    assert f.action.startswith("if running is at the engine's limit, raise --max-num-seqs")
    assert "more GPUs will not help" in f.action
    # vLLM exports no running limit: the number running may be it
    g = one(ctx(queued(running=4.0, max_running=None), [active(sm_active=0.2, dram_active=0.2)]))
    assert g.action.startswith("if 4 running is the engine's limit (not exported), raise "
                               "--max-num-seqs / --max-num-batched-tokens")


def test_sglang_names_its_own_flag():
    row = queued(engine="sglang", running=8.0, max_running=8.0)
    f = one(ctx(row, [active(sm_active=0.2, dram_active=0.15)]))
    assert "--max-running-requests" in f.action


def test_low_sm_activity_alone_does_not_call_the_gpu_idle():
    """Memory-bound decode runs at 10-20 % SM activity: without a memory measure (MBU or DRAM
    activity) a low SM reading is no evidence that the engine leaves the GPU idle."""
    row = queued(running=4.0, max_running=None)
    assert gpu_limit(ctx(row, [active(sm_active=0.15)])) == []
    assert one(ctx(row, [active(sm_active=0.15, dram_active=0.1)])).rule == "gpu_idle"
    assert one(ctx(replace(row, mbu=0.1), [active(sm_active=0.15)])).rule == "gpu_idle"


def test_healthy_engine_at_high_mbu_is_no_finding():
    """Busy hardware without a queue or a latency rise is a GPU doing its job."""
    row = healthy(mbu=0.85, mfu=0.2)
    assert gpu_limit(ctx(row, [active(dram_active=0.9, sm_active=0.95)], waiting_min=0.0)) == []


def test_no_claim_without_numbers():
    row = queued(running=8.0, max_running=8.0)
    assert gpu_limit(ctx(row)) == []  # no GPU, no counters
    util_only = gpu(util=0.97)  # NVML's busy time says nothing of the limit
    assert gpu_limit(ctx(row, [util_only])) == []
    lost = replace(active(sm_active=0.1), error="GPU is lost")
    assert gpu_limit(ctx(row, [lost])) == []


def test_garbage_readings_are_no_evidence():
    """NaN, infinite or impossible values (a bad exporter, a counter reset mid-window) are
    read as missing: never as low (idle) or high (bound)."""
    row = queued(running=8.0, max_running=8.0, mbu=float("nan"), mfu=float("inf"))
    assert gpu_limit(ctx(row, [active(sm_active=float("nan"), dram_active=7.0)])) == []
    f = one(ctx(row, [active(sm_active=float("nan"), dram_active=0.1)]))
    assert f.rule == "gpu_idle" and "MBU" not in f.summary and "SM activity" not in f.summary


def test_a_middle_reading_is_no_claim():
    row = queued(running=30.0, max_running=64.0, mbu=0.45)
    assert gpu_limit(ctx(row, [active(sm_active=0.6, dram_active=0.45)])) == []
    # one low number beside a high one is not "idle"
    assert gpu_limit(ctx(row, [active(sm_active=0.2, dram_active=0.45)])) == []


def test_full_kv_cache_is_not_called_an_idle_gpu():
    row = queued(running=8.0, max_running=64.0, kv_cache_usage=0.97)
    assert gpu_limit(ctx(row, [active(sm_active=0.2)])) == []


def test_no_pressure_no_claim_and_a_queue_that_drained_is_none():
    row = healthy(waiting=3.0, mbu=0.1)
    assert gpu_limit(ctx(row, [active(sm_active=0.1)], waiting_min=0.0)) == []
    assert gpu_limit(ctx(row, [active(sm_active=0.1)], waiting_min=None)) == []
    # a latency rise over too few requests is noise
    few = healthy(ttft_s=q(0.6, 1.4, 5))
    assert gpu_limit(ctx(few, [active(sm_active=0.1)], waiting_min=0.0)) == []


def test_an_itl_rise_over_enough_tokens_is_pressure():
    row = healthy(itl_s=q(0.06, 0.09, 6000), running=6.0, max_running=64.0)
    f = one(ctx(row, [active(sm_active=0.15, dram_active=0.1)], waiting_min=0.0))
    assert f.rule == "gpu_idle" and "ITL p95 90 ms (usual 45 ms)" in f.summary


def test_gpu_mean_skips_missing_and_lost_gpus():
    gs = [active(sm_active=0.2), active(sm_active=0.6), active(sm_active=None),
          replace(active(sm_active=1.0), error="GPU is lost")]
    assert gpu_mean(gs, "sm_active") == 0.4
    assert gpu_mean([], "sm_active") is None


def test_diagnose_puts_the_gpu_cause_before_the_queue_it_explains():
    row = queued(running=8.0, max_running=8.0, kv_cache_usage=0.3,
                 queue_s=q(3.0, 6.0, 60), ttft_s=q(3.2, 6.3, 60))
    g = active(sm_active=0.2, dram_active=0.1)
    found = diagnose([row], baselines={row.key: base()}, gpus=[g],
                     waiting_min={row.key: 10.0})
    rules = [f.rule for f in found if f.target == T]
    assert rules[:2] == ["gpu_idle", "queueing"], rules


def test_the_state_cell_has_a_word_for_each_side():
    from llmtop.ui import fmt
    from llmtop.ui.widgets.engines import WHY_BADGES

    assert WHY_BADGES["gpu_bound"] == "GPU BOUND" and WHY_BADGES["gpu_idle"] == "GPU IDLE"
    assert all(len(WHY_BADGES[r]) <= fmt.BADGE_WIDTH for r in ("gpu_bound", "gpu_idle"))


def test_sglangs_mbu_is_never_evidence_of_the_memory_limit():
    """SGLang counts the weights once per token in the batch: its MBU over-states the bytes at
    batch > 1 (even past 100 %). High, it proves nothing (DRAM activity may); low, it is an
    upper bound and still says idle."""
    row = queued(engine="sglang", running=48.0, max_running=64.0, mbu=1.2,
                 achieved_bytes_per_s=4.0e12, gpu_peak=PEAK)
    assert gpu_limit(ctx(row, [active(sm_active=0.3)])) == []
    f = one(ctx(row, [active(dram_active=0.8, sm_active=0.9)]))
    assert f.rule == "gpu_bound" and "MBU" not in f.summary and "DRAM busy 80 %" in f.summary
    assert "mbu" not in {e.signal for e in f.evidence}
    low = one(ctx(replace(row, mbu=0.1, running=4.0, max_running=4.0), [active(sm_active=0.2)]))
    assert low.rule == "gpu_idle" and "MBU 10 %" in low.summary
    vllm = one(ctx(replace(row, engine="vllm", mbu=0.82, achieved_bytes_per_s=2.75e12),
                   [active(sm_active=0.3)]))
    assert vllm.rule == "gpu_bound" and "MBU 82 %" in vllm.summary
