"""The rules on real engine output: tests/fixtures/metrics/vllm-real-cpu-v0.32.0-under-load.txt
(a real vLLM 0.32.0 with --max-num-seqs 8 under 30 concurrent streams: running 8, waiting 22,
KV nearly empty): admission-bound queueing, nothing else. Its values since start stand in for
one window (33 finished requests)."""

from __future__ import annotations

from pathlib import Path

from llmtop.diagnose import diagnose
from llmtop.history.derive import derive_lifetime
from llmtop.model import EngineRow
from llmtop.parse import registry

FIXTURE = (Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
           / "vllm-real-cpu-v0.32.0-under-load.txt")
T = "vllm@127.0.0.1:8000"


def _row() -> EngineRow:
    sample = registry.normalize("vllm", FIXTURE.read_text())
    m = sample.models[0]
    lt = derive_lifetime(m, start_time=None, t_wall=None)
    g = m.gauges
    return EngineRow(
        key=f"{T}|{m.model}", target=T, engine="vllm", model=m.model, state="ok",
        running=g.get("running"), waiting=g.get("waiting"), max_running=g.get("max_running"),
        kv_cache_usage=g.get("kv_usage"), prefix_hit_rate=lt.get("prefix_hit_rate"),
        ttft_s=lt["ttft_s"], itl_s=lt["itl_s"], queue_s=lt["queue_s"],
        prefill_s=lt.get("prefill_s"), prompt_len=lt.get("prompt_len"),
        finished=lt.get("finished"), preemptions_per_s=0.0)


def test_real_vllm_under_load_is_queueing_and_only_that():
    row = _row()
    assert row.queue_s is not None and row.queue_s.below == ("p50",)  # p50 < 0.3 s bucket
    f = diagnose([row], waiting_min={row.key: 22.0})
    assert [(x.rule, x.severity) for x in f] == [("queueing", "warn")]
    s = f[0].summary
    # the share comes from the exact means (_sum/_count), not the bucket-bound p50s
    assert "22 requests wait" in s and "of TTFT's mean" in s
    share = next(e for e in f[0].evidence if e.signal == "queue_share_of_ttft")
    assert 0.7 < share.value < 0.9  # type: ignore[operator]
    assert "KV is 1 %" in s


def test_real_vllm_queue_that_touched_zero_is_named_in_bursts():
    """The gauge touched 0 in the window, but 33 requests finished with queue time 70-90 %
    of TTFT: queueing in bursts (issue 34: the histograms are the stronger evidence)."""
    row = _row()
    f = diagnose([row], waiting_min={row.key: 0.0})
    assert [x.rule for x in f] == ["queueing"]
    assert "the queue comes in bursts" in f[0].summary
    assert "over the 33 requests that finished" in f[0].summary
