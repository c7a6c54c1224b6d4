"""What the real vLLM (CPU build, tiny model) showed: a 5 s window holds ~10 finished
requests, and one ``--once`` has no history. The rules still name an overwhelming queue, and a
prefix-cache collapse against the engine's lifetime before the window; a calm server and a
thin queue stay silent. Numbers as seen in tests/real_engine/test_real_vllm_incidents.py
(--max-num-seqs 2, 12 x 200 tokens: 8 finished in 5.3 s, 10 waiting, queue mean 6.3 s,
running time 1.6 s)."""

from __future__ import annotations

from dataclasses import replace

from llmtop.diagnose import Diagnoser, diagnose
from llmtop.diagnose.lifetime import lifetime_baseline
from llmtop.model import EngineRow, Quantiles
from tests.diagnose.rows import T, healthy

KEY = f"{T}|llama"


def _qm(mean: float, p95: float, n: float) -> Quantiles:
    return Quantiles(p50=mean, p90=p95, p95=p95, p99=p95, mean=mean, count=n)


def queued_few(**kw) -> EngineRow:
    r = healthy(running=2.0, waiting=10.0, max_running=None, kv_cache_usage=0.001,
                queue_s=_qm(6.3, 9.7, 8), ttft_s=_qm(7.3, 7.4, 8), inference_s=_qm(1.6, 2.0, 8),
                prefill_s=_qm(0.005, 0.3, 8), requests_per_s=1.5)
    return replace(r, **kw)


def test_an_overwhelming_queue_is_named_from_eight_requests():
    f = diagnose([queued_few()], window_s=5.0, waiting_min={KEY: 10.0})
    assert [x.rule for x in f] == ["queueing"]
    s = f[0].summary
    assert "10 requests wait" in s and "only 8 finished in 5 s" in s
    assert "\u00d73.9 as long as they ran" in s and "at least 10 waiting all window" in s
    ev = {e.signal: e.value for e in f[0].evidence}
    assert ev["requests"] == 8 and ev["inference_mean"] == 1.6
    # vLLM does not export --max-num-seqs: the action says so instead of only "add a replica"
    assert "--max-num-seqs" in f[0].action and "not exported" in f[0].action


def test_few_requests_need_every_part_of_the_evidence():
    def fires(row: EngineRow, wmin: float | None = 10.0) -> bool:
        found = diagnose([row], window_s=5.0, waiting_min={KEY: wmin} if wmin is not None
                         else None)
        return any(x.rule == "queueing" for x in found)

    assert fires(queued_few(), None)  # --once before its second scrape: the gauge alone
    assert not fires(queued_few(), 3.0)  # the queue was not long all window
    assert not fires(queued_few(waiting=4.0), 4.0)  # a thin queue
    assert not fires(queued_few(inference_s=_qm(4.0, 5.0, 8)))  # waited < 2x the run time
    assert not fires(queued_few(queue_s=_qm(6.3, 9.7, 2), ttft_s=_qm(7.3, 7.4, 2),
                                inference_s=_qm(1.6, 2.0, 2)))  # two requests are not enough
    assert not fires(queued_few(inference_s=None))  # no service time: cannot tell


def test_a_calm_server_with_few_requests_says_nothing():
    calm = healthy(running=1.0, waiting=0.0, queue_s=_qm(0.002, 0.3, 6),
                   ttft_s=_qm(0.03, 0.05, 6), inference_s=_qm(0.9, 1.0, 6), requests_per_s=1.2)
    assert diagnose([calm], window_s=5.0, waiting_min={KEY: 0.0}) == []


def _with_lifetime(hit: float, prefill_mean: float, n: float) -> EngineRow:
    return healthy(lifetime={"prefix_hit_rate": hit, "prefill_s": _qm(prefill_mean, 0.3, n),
                             "prompt_len": _qm(440, 480, n), "uptime_s": 70.0})


def test_lifetime_baseline_holds_only_what_a_lifetime_is_honest_for():
    b = lifetime_baseline(_with_lifetime(0.84, 0.0075, 1131))
    assert b is not None and b.lifetime
    assert dict(b.values) == {"hit_rate": 0.84, "prefill_mean": 0.0075}
    assert lifetime_baseline(_with_lifetime(0.84, 0.0075, 12)) is None  # too young
    assert lifetime_baseline(healthy()) is None  # no lifetime values


def test_prefix_collapse_against_the_lifetime_before_the_window():
    b = lifetime_baseline(_with_lifetime(0.84, 0.0075, 1131))
    now = healthy(prefix_hit_rate=0.0, prefill_s=replace(_qm(0.020, 0.3, 200), below=("p95",)),
                  prompt_len=_qm(440, 480, 200), ttft_s=_qm(0.03, 0.058, 200),
                  requests_per_s=40.0)
    f = diagnose([now], baselines={now.key: b}, window_s=5.0)
    assert [x.rule for x in f] == ["prefix_cache_miss"]
    assert f[0].severity == "warn"  # prefill mean 20 ms vs 7.5 ms: the lost prefix costs
    assert "over its lifetime before this window 84 %" in f[0].summary
    # the same window on an engine whose lifetime had no reuse: nothing to lose
    b0 = lifetime_baseline(_with_lifetime(0.05, 0.02, 1131))
    assert diagnose([now], baselines={now.key: b0}, window_s=5.0) == []


def test_a_held_symptom_ends_when_its_cause_is_named():
    """A TTFT rise seen before the queue had lasted a whole window is the queue: once
    ``queueing`` fires, the held ``ttft_rise`` ends instead of lingering 15 s beside it."""
    d = Diagnoser(every_s=1.0)
    calm = healthy()
    for t in range(0, 60, 10):
        d.observe(float(t), [calm], [])
    slow = healthy(ttft_s=_qm(3.0, 4.0, 60))
    d.update(100.0, [slow], [], waiting_min={KEY: 0.0}, force=True)
    assert [f.rule for f in d.findings] == ["ttft_rise"]
    q = replace(slow, waiting=10.0, queue_s=_qm(2.9, 3.9, 60), ttft_s=_qm(3.0, 4.0, 60))
    out = d.update(105.0, [q], [], waiting_min={KEY: 10.0}, force=True)
    assert [f.rule for f in d.findings] == ["queueing"]
    assert ("end", "ttft_rise") in [(tr.kind, tr.finding.rule) for tr in out]


def test_once_uses_the_first_scrape_as_lifetime_and_the_smaller_waiting():
    from llmtop.model import Snapshot
    from llmtop.once import _diagnose

    before = replace(queued_few(waiting=12.0), lifetime={
        "prefix_hit_rate": 0.0, "prefill_s": _qm(0.005, 0.3, 100), "uptime_s": 60.0})
    first = Snapshot(time=0.0, window_s=0.0, engines=[before])
    f = _diagnose(first, Snapshot(time=5.0, window_s=5.0, engines=[queued_few()]), 5.0)
    assert [x.rule for x in f] == ["queueing"]
    assert "at least 10 waiting all window" in f[0].summary  # min(12, 10)
    thin = replace(before, waiting=3.0)
    f = _diagnose(Snapshot(time=0.0, window_s=0.0, engines=[thin]),
                  Snapshot(time=5.0, window_s=5.0, engines=[queued_few()]), 5.0)
    assert f == []  # 3 waiting at the first scrape: not a queue all window long
