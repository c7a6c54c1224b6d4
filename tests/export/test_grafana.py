"""``examples/llmtop-grafana.json`` is the generator's output and asks only for series the
exporter serves (or Prometheus' own functions over them)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from llmtop.export.names import SERIES

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("mkdash",
                                                  ROOT / "scripts" / "make_grafana_dashboard.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dashboard_is_generated_and_uses_served_names():
    doc = json.loads((ROOT / "examples" / "llmtop-grafana.json").read_text(encoding="utf-8"))
    assert doc == json.loads(json.dumps(_gen().dashboard()))
    names = {s.name for s in SERIES}
    rows = [p["title"] for p in doc["panels"] if p["type"] == "row"]
    assert rows[:2] == ["Is it up?", "What is wrong? (llmtop's diagnosis)"]
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 25
    for e in exprs:
        used = set(re.findall(r"\bllmtop_\w+", e))
        assert used and used <= names, (e, used - names)
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))


def test_dashboard_queries_parse(tmp_path):
    """Each query is valid PromQL: ``promtool check rules`` over them as recording rules."""
    import subprocess

    from tests.export.conftest import need_binary

    promtool = need_binary("promtool")
    doc = json.loads((ROOT / "examples" / "llmtop-grafana.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    rules = {"groups": [{"name": "dash", "rules": [
        {"record": f"dash:q{i}", "expr": e.replace("$", "")} for i, e in enumerate(exprs)]}]}
    f = tmp_path / "dash.yaml"
    f.write_text(json.dumps(rules), encoding="utf-8")
    out = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
