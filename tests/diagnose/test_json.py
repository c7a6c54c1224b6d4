"""The diagnosis in ``--once --json`` (documented in docs/json-schema.md) and in the
``--once`` table."""

from __future__ import annotations

import io
import json
import math
import re
from pathlib import Path

from llmtop.console.once_table import print_once
from llmtop.diagnose import RULE_IDS, SEVERITIES, diagnose
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.model import Snapshot
from llmtop.once import empty_json, snapshot_json
from tests.diagnose.rows import T, base, healthy

DOC = Path(__file__).resolve().parents[2] / "docs" / "json-schema.md"
FINDING_KEYS = ["rule", "severity", "target", "model", "summary", "evidence", "action",
                "explains"]
EVIDENCE_KEYS = ["signal", "value", "window", "baseline", "threshold"]


def _snap_and_findings():
    bad = healthy(kv_cache_usage=0.99, waiting=31.0, preemptions_per_s=2.5)
    other = healthy("sglang@127.0.0.1:30000", model="qwen", engine="sglang",
                    finished={"stop": 40.0, "abort": 20.0})
    rows = [bad, other]
    findings = diagnose(rows, baselines={bad.key: base(), other.key: base()})
    return Snapshot(time=1.7e9, window_s=30.0, engines=rows), findings


def _doc_table(title: str) -> list[str]:
    text = DOC.read_text()
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| `([a-z_]+)`", section, re.M)]


def test_json_has_a_documented_diagnosis_list():
    snap, findings = _snap_and_findings()
    doc = json.loads(snapshot_json(snap, findings))
    assert list(doc)[-1] == "diagnosis" and "diagnosis" in _doc_table("Top level")
    assert [(f["target"], f["rule"], f["severity"]) for f in doc["diagnosis"]] == [
        (T, "kv_pressure", "critical"), ("sglang@127.0.0.1:30000", "aborts", "info")]
    for f in doc["diagnosis"]:
        assert list(f) == FINDING_KEYS
        assert all(list(e) == EVIDENCE_KEYS for e in f["evidence"])
    assert _doc_table("Finding") == FINDING_KEYS
    section = DOC.read_text().split("## Finding\n", 1)[1].split("\n## ", 1)[0]
    rules_row = next(line for line in section.splitlines() if line.startswith("| `rule`"))
    assert set(re.findall(r"`([a-z_]+)`", rules_row)) - {"rule"} == set(RULE_IDS)
    sev_row = next(line for line in section.splitlines() if line.startswith("| `severity`"))
    assert set(re.findall(r"`([a-z_]+)`", sev_row)) - {"severity"} == set(SEVERITIES)


def test_json_without_findings_and_when_nothing_was_found():
    snap, _ = _snap_and_findings()
    assert json.loads(snapshot_json(snap))["diagnosis"] == []
    assert json.loads(empty_json("nothing"))["diagnosis"] == []


def test_evidence_numbers_stay_json_safe():
    f = Finding("errors", "warn", T, None, "s", (Evidence("x", math.nan, "30s", math.inf,
                                                          math.nan),), "a")
    doc = json.loads(snapshot_json(Snapshot(time=0.0, window_s=1.0), [f]))
    assert doc["diagnosis"][0]["evidence"][0] == {
        "signal": "x", "value": None, "window": "30s", "baseline": None, "threshold": None}


def test_once_table_prints_the_top_finding_per_engine():
    snap, findings = _snap_and_findings()
    buf = io.StringIO()
    print_once(snap, file=buf, diagnosis=findings)
    out = buf.getvalue()
    why = out.split("why:\n", 1)[1]
    lines = why.splitlines()
    assert lines[0].startswith(f"  {T} [llama]: kv_pressure (critical) KV cache 99 % full")
    assert "--gpu-memory-utilization" in lines[1]
    assert "sglang@127.0.0.1:30000 [qwen]: aborts (info)" in lines[2]
    buf = io.StringIO()
    print_once(snap, file=buf)
    assert "why:" not in buf.getvalue()
