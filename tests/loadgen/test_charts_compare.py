"""Charts (pygal SVG, one HTML page) and ``probe compare`` on reports with a known change."""

from __future__ import annotations

import html.parser
import json
import sys
import xml.etree.ElementTree as ET

import pytest

from llmtop.loadgen.compare import compare
from llmtop.loadgen.report import capacity

pytest.importorskip("pygal")


def _q(v: float) -> dict:
    return {"p50": v / 2, "p90": v, "p95": v, "p99": v, "mean": v / 2}


def _report(scale: float, ttft_scale: float, knee: int, sla: int) -> dict:
    steps = []
    for i, c in enumerate((1, 2, 4, 8, 16, 32, 64)):
        tps = scale * 100 * min(c, knee)
        steps.append({"index": i, "concurrency": c, "rate": None, "requests": 100,
                      "partial": False, "output_tokens_per_s": tps,
                      "requests_per_s": tps / 100, "achieved_concurrency": c,
                      "goodput_per_s": tps / 100, "ttft_s": _q(ttft_scale * 0.01 * c),
                      "itl_s": _q(0.01), "e2e_s": _q(1.0), "errors": {},
                      "client_bound": False})
    by = {s["concurrency"]: s for s in steps}
    return {"target": "http://127.0.0.1:1", "model": "m", "steps": steps,
            "options": {"sweep": True, "ttft_slo": 0.3},
            "saturation": {"concurrency": knee, "knee_load": knee * 0.9,
                           "step": by[knee]["index"],
                           "output_tokens_per_s": by[knee]["output_tokens_per_s"],
                           "requests_per_s": by[knee]["requests_per_s"]},
            "max_throughput": {"concurrency": 64, "step": 6,
                               "output_tokens_per_s": steps[-1]["output_tokens_per_s"],
                               "requests_per_s": steps[-1]["requests_per_s"]},
            "sla_boundary": {"concurrency": sla, "step": by[sla]["index"], "met": True,
                             "slo": {"ttft": 0.3, "itl": None, "tpot": None},
                             "requests_per_s": by[sla]["requests_per_s"],
                             "output_tokens_per_s": by[sla]["output_tokens_per_s"],
                             "goodput_per_s": by[sla]["requests_per_s"]},
            "stop_reason": "ladder_done"}


def test_compare_gives_the_known_deltas():
    a = _report(1.0, 1.0, knee=16, sla=16)
    b = _report(1.2, 0.5, knee=32, sla=32)
    b["steps"] = [s for s in b["steps"] if s["concurrency"] != 4]  # B never ran c=4
    res = compare([a, b], names=["before", "after"])
    (c,) = res["comparisons"]
    rows = {r["concurrency"]: r for r in c["rows"]}
    assert rows[8]["tokens_change"] == pytest.approx(0.2)
    assert rows[8]["ttft_change"] == pytest.approx(-0.5)
    assert rows[4]["interpolated"] and rows[4]["tokens_per_s"][1] == pytest.approx((240 + 960) / 2)
    assert rows[32]["tokens_change"] == pytest.approx(1.2 * 3200 / 1600 - 1)
    assert c["knee"]["a"] == 16 and c["knee"]["b"] == 32 and c["knee"]["factor"] == 2
    assert c["sla_boundary"]["a_text"] == "c=16" and c["sla_boundary"]["b_text"] == "c=32"
    assert c["capacity"]["a"] == 16 and c["capacity"]["b"] == pytest.approx(38.4)
    assert "knee c=16 \u2192 c=32" in c["sentence"] and "holds 16.0 \u2192 38.4" in c["sentence"]


def test_capacity_sentence_and_replicas():
    cap = capacity(_report(1.0, 1.0, knee=16, sla=8), target_rate=100)
    assert cap["sentence"].startswith("Holds 8.0 req/s (800 output tok/s) of this traffic "
                                      "with TTFT p95 \u2264 300 ms; saturates at c=16.")
    assert cap["replicas"] == 13 and "needs 13 such replicas" in cap["sentence"]


class _Html(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"):
                self.external.append(v)


def test_html_and_svg_charts_carry_knee_sla_and_slo(tmp_path):
    from llmtop.report import write_charts

    rep = _report(1.0, 1.0, knee=16, sla=8)
    paths = write_charts([rep], html_path=str(tmp_path / "r.html"),
                         svg_prefix=str(tmp_path / "r"))
    assert len(paths) == 4
    for kind in ("throughput", "ttft", "latency_throughput"):
        svg = (tmp_path / f"r-{kind}.svg").read_text()
        root = ET.fromstring(svg.split("\n", 1)[1])  # parses as XML
        texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
        assert "knee c=16" in texts and "SLA boundary c=8" in texts
        if kind != "throughput":
            assert "SLO: TTFT p95 \u2264 300 ms" in texts
    page = (tmp_path / "r.html").read_text()
    p = _Html()
    p.feed(page)
    assert p.tags.count("svg") == 3 and "table" in p.tags
    assert not p.external, p.external  # nothing to fetch: it opens offline
    assert "Holds 8.0 req/s" in page and "<script src" not in page


def test_cli_compare_prints_and_writes(tmp_path):
    import subprocess

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_report(1.0, 1.0, knee=16, sla=16)))
    b.write_text(json.dumps(_report(1.2, 0.5, knee=32, sla=32)))
    r = subprocess.run([sys.executable, "-m", "llmtop", "probe", "compare", str(a), str(b),
                        "--html", str(tmp_path / "c.html"), "--json", str(tmp_path / "c.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "+20%" in r.stdout and "-50%" in r.stdout and "knee c=16 \u2192 c=32" in r.stdout
    assert "Comparison" in (tmp_path / "c.html").read_text()
    assert json.loads((tmp_path / "c.json").read_text())["comparisons"][0]["knee"]["b"] == 32
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = subprocess.run([sys.executable, "-m", "llmtop", "probe", "compare", str(a), str(bad)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a probe report" in r.stderr


def test_loadgen_never_imports_a_plotting_library():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "llmtop" / "loadgen"
    for f in root.glob("*.py"):
        text = f.read_text()
        for lib in ("pygal", "plotext", "matplotlib", "llmtop.report"):
            assert f"import {lib}" not in text and f"from {lib}" not in text, (f, lib)


def test_charts_without_pygal_say_what_to_install(monkeypatch, tmp_path):
    import subprocess

    from llmtop.report import charts_available

    monkeypatch.setitem(sys.modules, "pygal", None)
    assert "pip install pygal" in charts_available()
    # the CLI stops before any load (port 1 is never contacted: the check comes first)
    code = ("import sys; sys.modules['pygal'] = None; from llmtop.cli.main import main; "
            "sys.exit(main(['probe', 'http://127.0.0.1:1', '--html', 'x.html']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "pip install pygal" in r.stderr, r.stderr
