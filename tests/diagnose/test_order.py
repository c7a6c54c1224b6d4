"""Ordering: per engine the root cause first (whatever the severities), then severity."""

from __future__ import annotations

from llmtop.diagnose import diagnose, order_findings
from llmtop.diagnose.findings import Finding
from tests.diagnose.rows import T, base, gpu, healthy, q


def F(rule: str, sev: str = "warn", target: str = T) -> Finding:
    return Finding(rule, sev, target, "llama", rule)


def test_kv_pressure_before_queueing_even_when_queueing_is_worse():
    r = healthy(kv_cache_usage=0.96, waiting=25.0, preemptions_per_s=0.1, running=8.0,
                queue_s=q(2.4, 3.1, 60), ttft_s=q(2.5, 3.2, 60))
    f = diagnose([r], baselines={r.key: base()}, waiting_min={r.key: 20.0})
    assert [x.rule for x in f] == ["kv_pressure", "queueing"]
    assert f[0].severity == "warn" and f[1].severity == "critical"


def test_gpu_throttle_before_decode_slowdown():
    r = healthy(itl_s=q(0.075, 0.1, 6000))
    f = diagnose([r], baselines={r.key: base()},
                 gpus=[gpu(throttle=["hw slowdown"], clock=1500)])
    assert [x.rule for x in f] == ["gpu_throttle", "decode_slowdown"]


def test_prompt_causes_before_queueing_and_ttft():
    got = order_findings([F("queueing", "critical"), F("ttft_rise"), F("prefix_cache_miss"),
                          F("long_prompts", "info")])
    # both causes first (by severity), then what they explain, by depth
    assert [x.rule for x in got] == ["prefix_cache_miss", "long_prompts", "queueing",
                                     "ttft_rise"]


def test_a_prefix_collapse_before_the_decode_slowdown_its_prefills_cause():
    """Real SGLang, shared document -> unique prompts, 2 clients: the unique prefills run
    between decode steps, so ITL rose (critical) with the prefill; the cause comes first,
    the slowdown stays listed after it."""
    got = order_findings([F("decode_slowdown", "critical"), F("prefix_cache_miss", "warn")])
    assert [(x.rule, x.severity) for x in got] == [("prefix_cache_miss", "warn"),
                                                   ("decode_slowdown", "critical")]


def test_unrelated_findings_by_severity_and_engines_keep_their_order():
    other = "sglang@127.0.0.1:30000"
    got = order_findings([F("aborts", "info", other), F("errors", "warn", other),
                          F("errors", "critical"), F("spec_decode_drop", "warn")],
                         targets=[T, other])
    assert [(x.target, x.rule) for x in got] == [(T, "errors"), (T, "spec_decode_drop"),
                                                 (other, "errors"), (other, "aborts")]


def test_explained_chain_keeps_depth():
    got = order_findings([F("aborts", "info"), F("queueing", "critical"),
                          F("kv_pressure", "warn")])
    assert [x.rule for x in got] == ["kv_pressure", "queueing", "aborts"]
