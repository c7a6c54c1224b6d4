"""The verdict line names each engine's top warn/critical finding first and takes its
severity; info findings leave it alone."""

from __future__ import annotations

from llmtop.diagnose.findings import Finding
from llmtop.model import Snapshot
from llmtop.verdict import CRIT, OK, WARN, compute_verdict
from tests.diagnose.rows import T, healthy

OTHER = "sglang@127.0.0.1:30000"


def _snap(**kw) -> Snapshot:
    return Snapshot(time=0.0, window_s=10.0, engines=[healthy(**kw), healthy(OTHER)])


def test_top_finding_is_named_first_with_its_severity():
    snap = _snap(kv_cache_usage=0.99, waiting=31.0, preemptions_per_s=4.0)
    findings = [Finding("kv_pressure", "critical", T, "llama", "s"),
                Finding("queueing", "warn", T, "llama", "s"),
                Finding("errors", "warn", OTHER, "llama", "s")]
    v = compute_verdict(snap, diagnosis=findings)
    assert v.level == CRIT
    assert v.text.startswith("CRITICAL \u2014 vllm@:8000 kv_pressure \u00b7 KV 99%")
    assert "queueing" not in v.text  # one name per engine: its root cause
    assert "sglang@:30000 errors" in v.text


def test_a_warn_finding_degrades_an_otherwise_ok_verdict():
    v = compute_verdict(_snap(), diagnosis=[Finding("decode_slowdown", "warn", T, "llama",
                                                    "s")])
    assert v.level == WARN and v.text == "DEGRADED \u2014 vllm@:8000 decode_slowdown"


def test_info_findings_and_none_leave_the_verdict_ok():
    v = compute_verdict(_snap(), diagnosis=[Finding("aborts", "info", T, "llama", "s")])
    assert v.level == OK and v.text.startswith("OK \u2014 2 engines healthy")
    assert compute_verdict(_snap()).text == v.text
