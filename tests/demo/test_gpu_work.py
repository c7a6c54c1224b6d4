"""The demo's own count of its work (vLLM's ``--enable-mfu-metrics`` counters) agrees with a
hand computation of the simulated steps, and the demo GPU's GPM-shaped activity follows it:
a decode batch of long contexts moves most of the peak bandwidth, an engine that waits on
its host side between steps leaves the GPU idle however busy ``util`` reads."""

from __future__ import annotations

import pytest

from llmtop.demo import formats_vllm
from llmtop.demo.gpu import SimGpu
from llmtop.demo.profiles import DEFAULT_PROFILE, PROFILES, engine_settings
from llmtop.demo.sim import Engine, Request
from llmtop.gpu.demo import record_from_json

P = DEFAULT_PROFILE


def _engine(profile=P) -> Engine:
    return Engine("vllm", engine_settings("vllm"), profile, formats_vllm.HIST_BOUNDS, seed=1)


def _decoding(rid: int, prompt: int, output: int) -> Request:
    """A running request past its prefill: ``prompt`` tokens computed, ``output`` made."""
    r = Request(rid, prompt, [], 10_000, 10_000, stream=True, ignore_eos=True,
                background=True, arrival=0.0)
    r.computed = r.prefill_target = prompt
    r.output = output
    return r


def test_a_decode_step_reads_the_weights_once_and_each_rows_kv():
    e = _engine()
    rows = [(_decoding(i, 500, 101), 1, False) for i in range(8)]
    e._count_work(rows)
    c = e.stats.c
    # 8 rows, each with 500 + 100 tokens already in KV; one new token each
    kv = 8 * 600 * P.kv_bytes_per_token
    assert c["est_read_bytes"] == pytest.approx(P.weights_bytes + kv)
    assert c["est_write_bytes"] == pytest.approx(8 * P.kv_bytes_per_token)
    dense = 2 * P.params * 8
    assert c["est_flops"] == pytest.approx(dense + 8 * 601 * P.attn_flops_per_ctx_token)
    assert P.params == pytest.approx(8.05e9, rel=0.01)  # Llama-3.1-8B: 8.03 B parameters


def test_a_prefill_chunk_counts_its_tokens_and_attention_within_the_chunk():
    e = _engine()
    r = Request(1, 1000, [], 10, 10, stream=True, ignore_eos=True, background=False,
                arrival=0.0)
    r.computed = 200  # a second chunk: 200 tokens already in KV
    e._count_work([(r, 300, True)])
    c = e.stats.c
    assert c["est_read_bytes"] == pytest.approx(P.weights_bytes + 200 * P.kv_bytes_per_token)
    assert c["est_write_bytes"] == pytest.approx(300 * P.kv_bytes_per_token)
    attn = 300 * (200 + 301 / 2)
    assert c["est_flops"] == pytest.approx(2 * P.params * 300 + attn * P.attn_flops_per_ctx_token)


def test_no_rows_no_work():
    e = _engine()
    e._count_work([])
    assert e.stats.c["est_read_bytes"] == 0 and e.stats.c["est_flops"] == 0


async def test_a_served_request_fills_the_counters_in_metrics():
    e = _engine()
    e.start()
    try:
        r = e.submit([f"w{i}" for i in range(64)], 20, ignore_eos=True)
        while not r.done:
            await r.wait()
    finally:
        await e.close()
    body = formats_vllm.render(e).decode()
    steps = e.steps
    read = e.stats.c["est_read_bytes"]
    assert steps >= 20 and read >= steps * P.weights_bytes  # the weights, every step
    line = next(x for x in body.splitlines()
                if x.startswith("vllm:estimated_read_bytes_per_gpu_total{"))
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(read)


def _run_gpu(monkeypatch, e: Engine, step_s: float, gap_s: float, rows, seconds: float = 20):
    """Drive ``e``'s GPU as if the engine stepped ``rows`` every ``step_s + gap_s``."""
    gpu = SimGpu(0, e, "vllm@127.0.0.1:1")
    now = [1000.0]
    monkeypatch.setattr("llmtop.clock.monotonic", lambda: now[0])
    gpu._last = (now[0], e.busy_s)
    e.last_batch = len(rows)
    period = step_s + gap_s
    for _ in range(int(seconds / 0.5)):
        n = round(0.5 / period)
        for _ in range(n):
            e._count_work(rows)
        e.busy_s += n * step_s
        now[0] += 0.5
        gpu.update()
    return gpu.record()


def test_long_context_decode_on_a_tuned_gpu_saturates_bandwidth(monkeypatch):
    p = PROFILES["h100-llama3-8b-tuned"]
    e = _engine(p)
    rows = [(_decoding(i, 1500, 300), 1, False) for i in range(64)]
    ctx = 64 * 1800
    step = p.step_base_s + 64 * p.per_seq_s + ctx * p.per_ctx_token_s
    rec = _run_gpu(monkeypatch, e, step, p.step_gap_s, rows)
    bytes_per_s = (p.weights_bytes + ctx * p.kv_bytes_per_token) / (step + p.step_gap_s)
    assert bytes_per_s / p.peak_bytes_s > 0.8  # the scenario's premise: MBU above 0.8
    assert rec["dram_active"] == pytest.approx(min(1.0, 1.08 * bytes_per_s / p.peak_bytes_s),
                                               abs=0.02)
    assert rec["sm_active"] > 0.8 and rec["activity_source"] == "demo"
    assert rec["tensor_active"] < 0.2  # decode: memory-bound, the tensor cores mostly wait


def test_host_bound_steps_leave_the_gpu_idle(monkeypatch):
    """An engine that spends 30 ms of host time per step on 8 rows: SM and DRAM activity
    low, below even NVML's busy time."""
    e = _engine()
    rows = [(_decoding(i, 300, 50), 1, False) for i in range(8)]
    step = P.step_base_s + 8 * P.per_seq_s + 8 * 350 * P.per_ctx_token_s
    rec = _run_gpu(monkeypatch, e, step, 0.030, rows)
    assert rec["dram_active"] < 0.3 and rec["sm_active"] < 0.3
    assert rec["sm_active"] < rec["util"] < 0.35


def test_a_busy_engine_below_its_bandwidth_keeps_the_sms_active(monkeypatch):
    """64 rows on the default H100: each step's per-row kernels keep the SMs busy though
    only a third of the peak bandwidth moves (the ``queueing`` scenario's engine)."""
    e = _engine()
    rows = [(_decoding(i, 400, 200), 1, False) for i in range(64)]
    step = P.step_base_s + 64 * P.per_seq_s + 64 * 600 * P.per_ctx_token_s
    rec = _run_gpu(monkeypatch, e, step, P.step_gap_s, rows)
    assert 0.25 <= rec["dram_active"] <= 0.5 and rec["sm_active"] >= 0.75


def test_record_from_json_reads_the_activity_fields():
    rec = record_from_json({"index": 0, "sm_active": 0.42, "dram_active": 0.8,
                            "tensor_active": 0.1, "sm_occupancy": 0.2, "fp16_active": 0.01,
                            "activity_source": "demo", "activity_note": None,
                            "throttle_time": {"power": 0.5, "thermal": 0.0}})
    assert (rec.sm_active, rec.dram_active, rec.tensor_active) == (0.42, 0.8, 0.1)
    assert rec.activity_source == "demo" and rec.activity_note is None
    assert rec.throttle_time == {"power": 0.5, "thermal": 0.0}


def test_record_from_json_turns_bad_activity_into_none():
    rec = record_from_json({"index": 0, "sm_active": 42, "dram_active": float("nan"),
                            "tensor_active": "busy", "sm_occupancy": -0.1, "fp16_active": True,
                            "activity_source": 7,
                            "throttle_time": {"power": "x", "thermal": 3.0, "sync": 0.25}})
    assert (rec.sm_active, rec.dram_active, rec.tensor_active, rec.sm_occupancy,
            rec.fp16_active) == (None, None, None, None, None)
    assert rec.activity_source == "7"
    assert rec.throttle_time == {"sync": 0.25}
    assert record_from_json({"index": 0, "throttle_time": [1]}).throttle_time is None


def test_a_noisy_neighbour_keeps_the_gpu_busy_while_the_engine_moves_less(monkeypatch):
    """``decode-slowdown``: each step takes 2.5x as long, filled by another process's kernels:
    the GPU's DRAM activity stays, only the engine's own bytes/s (its MBU) fall."""
    rows = [(_decoding(i, 400, 100), 1, False) for i in range(20)]
    step = P.step_base_s + 20 * P.per_seq_s + 20 * 500 * P.per_ctx_token_s
    calm = _run_gpu(monkeypatch, _engine(), step, P.step_gap_s, rows)
    slow = _engine()
    slow.decode_factor = 2.5
    noisy = _run_gpu(monkeypatch, slow, 2.5 * step, P.step_gap_s, rows)
    assert noisy["dram_active"] == pytest.approx(calm["dram_active"], rel=0.15)
    assert noisy["sm_active"] >= 0.85 * calm["sm_active"]
