"""The verdict line names each engine's top warn/critical finding first and takes its
severity; info findings leave it alone."""

from __future__ import annotations

from llmtop.console.once_table import diagnosis_lines
from llmtop.diagnose.findings import Finding, order_findings
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


ROUTED = "vllm@127.0.0.1:36327"


def _routing_snap() -> Snapshot:
    return Snapshot(time=0.0, window_s=10.0, engines=[
        healthy(ROUTED, running=1.0, max_running=1.0, waiting=10.0),
        healthy("vllm@127.0.0.1:36328", running=1.0, max_running=8.0)])


def _routing_findings() -> list[Finding]:
    """The routing demo's findings, ordered as ``w`` lists them."""
    return order_findings([
        Finding("queueing", "critical", ROUTED, "llama", "10 requests wait"),
        Finding("routing", "warn", ROUTED, "llama", "round robin sends it 50 %"),
    ], [ROUTED])


def test_the_verdict_names_the_root_cause_and_what_it_explains():
    """``w`` lists routing first and queueing second; the header says both, root cause
    first, at the worse level (queueing is critical), within 80 columns."""
    findings = _routing_findings()
    assert [f.rule for f in findings] == ["routing", "queueing"]
    assert findings[0].explains == ("queueing",) and findings[1].explains == ()
    v = compute_verdict(_routing_snap(), diagnosis=findings,
                        waiting_growth={f"{ROUTED}|llama": 12.0})
    assert v.level == CRIT
    assert v.text.startswith("CRITICAL \u2014 vllm@:36327 routing \u2192 queueing \u00b7 "
                             "waiting 10 (+12/min)"), v.text
    assert len("CRITICAL \u2014 vllm@:36327 routing \u2192 queueing \u00b7 waiting 10") <= 80


def test_the_worst_explained_finding_is_named_and_explains_is_in_json():
    f = order_findings([
        Finding("queueing", "critical", T, "llama", "s"),
        Finding("gpu_idle", "warn", T, "llama", "s"),
        Finding("ttft_rise", "warn", T, "llama", "s"),
        Finding("routing", "warn", T, "llama", "s"),
    ], [T])
    assert [x.rule for x in f] == ["routing", "gpu_idle", "queueing", "ttft_rise"]
    assert f[0].explains == ("gpu_idle", "queueing", "ttft_rise")
    assert f[1].explains == ("queueing", "ttft_rise")
    assert f[0].to_json()["explains"] == ["gpu_idle", "queueing", "ttft_rise"]
    v = compute_verdict(_snap(), diagnosis=f)
    assert "vllm@:8000 routing \u2192 queueing" in v.text and v.level == CRIT


def test_an_info_effect_is_not_named_and_a_lone_cause_stands_alone():
    f = order_findings([Finding("gpu_bound", "warn", T, "llama", "s"),
                        Finding("queueing", "info", T, "llama", "s")], [T])
    assert f[0].explains == ("queueing",)
    v = compute_verdict(_snap(), diagnosis=f)
    assert v.level == WARN and v.text == "DEGRADED \u2014 vllm@:8000 gpu_bound"


def test_once_lines_say_what_the_header_says():
    lines = [t.plain for t in diagnosis_lines(_routing_findings())]
    assert lines[0].startswith(f"  {ROUTED} [llama]: routing (warn) \u2192 queueing (critical) "
                               "round robin"), lines
    assert lines[0].endswith("(+1 more)")


def test_why_screen_names_what_a_cause_explains():
    from llmtop.ui.screens.why import why_renderable

    texts: list[str] = []
    for part in why_renderable(_routing_findings()).renderables:
        cells = getattr(part, "columns", None)
        if cells is None:
            texts.append(str(part))
            continue
        rows = zip(*(c._cells for c in cells), strict=True)
        texts += [" ".join(str(x) for x in row) for row in rows]
    text = "\n".join(texts)
    assert text.index("routing") < text.index("cause of: queueing") < text.index("CRITICAL")
