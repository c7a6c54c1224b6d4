"""A capacity is a ceiling some step showed: real vLLM sweeps whose load generator was starved
(client-bound) at some steps, and one pinned apart where it was not
(``tests/fixtures/probe/``, each with its ``fixture_note``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmtop.capacity import ceiling, load_profile_file, load_profiles, profile_from_report
from llmtop.cli.capacity import save_probe_capacity
from llmtop.console.probe_view import print_summary
from llmtop.errors import ConfigError
from llmtop.loadgen.compare import compare
from llmtop.loadgen.report import capacity, to_markdown, unmet_sla_text
from llmtop.report.html import html_report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "probe"


def _report(name: str) -> dict:
    return json.loads((FIXTURES / f"real-vllm-cpu-{name}.json").read_text(encoding="utf-8"))


def _bound(rep: dict) -> list[int]:
    return [s["concurrency"] for s in rep["steps"] if s["client_bound"]]


def test_the_fixtures_are_what_their_notes_say():
    assert _bound(_report("bound-above")) == [8, 32]
    assert _bound(_report("bound-below")) == [2, 8]
    assert _bound(_report("bound-every-step")) == [2, 8, 32]
    assert _bound(_report("pinned")) == []


def test_client_bound_steps_above_the_boundary_leave_only_at_least():
    rep = _report("bound-above")
    # c=2 met the SLO; c=8 (TTFT p95 375 ms) and c=32 were the starved generator's numbers
    assert rep["sla_boundary"]["concurrency"] == 2
    assert ceiling.above_boundary(rep["steps"], rep["sla_boundary"]) != []
    assert not ceiling.boundary_bounded(rep["steps"], rep["sla_boundary"])
    cap = capacity(rep)
    assert cap["sentence"].startswith("Holds at least 8.2 req/s (1,050 output tok/s)"), cap
    assert "client-bound at c=8, c=32 above it" in cap["sentence"]
    assert "limit was not found" in cap["sentence"] and "saturat" not in cap["sentence"]
    assert cap["limit_hidden_at"] == ["c=8", "c=32"]
    assert cap["holds_rps"] == pytest.approx(8.2, rel=1e-3)
    assert profile_from_report(rep) is None


def test_no_load_met_names_a_step_the_generator_drove():
    rep = _report("bound-below")
    cap = capacity(rep)
    # not c=2, whose 376 ms p95 was under the SLO and the generator's anyway
    assert cap["sentence"].startswith("No load met TTFT p95 ≤ 600 ms: at c=32 TTFT p95 was "
                                      "1,235 ms"), cap
    assert "client-bound at c=2, c=8 below it" in cap["sentence"]
    assert cap["holds_rps"] is None and cap["limit_hidden_at"] == []
    assert profile_from_report(rep) is None


def test_every_step_client_bound_is_no_capacity_figure():
    cap = capacity(_report("bound-every-step"))
    assert cap["sentence"] == ("No capacity figure: the load generator was client-bound at "
                               "every step (c=2, c=8, c=32).")
    assert cap["holds_rps"] is None and cap["limit_hidden_at"] == ["c=2", "c=8", "c=32"]


def test_a_pinned_sweep_finds_the_ceiling_and_saves_it():
    rep = _report("pinned")
    cap = capacity(rep)
    assert cap["sentence"].startswith("Holds 15.0 req/s"), cap
    assert "at least" not in cap["sentence"] and cap["limit_hidden_at"] == []
    p = profile_from_report(rep)
    assert p is not None and p.requests_per_s == pytest.approx(15.0, rel=1e-3)


def test_one_drivable_failing_step_above_is_enough_for_a_ceiling():
    rep = _report("bound-above")
    c32 = rep["steps"][2]
    c32.update(client_bound=False, client_bound_reasons=[])  # c=32 failed the SLO (1.8 s)
    assert ceiling.boundary_bounded(rep["steps"], rep["sla_boundary"])
    assert profile_from_report(rep).requests_per_s == pytest.approx(8.2, rel=1e-3)
    assert capacity(rep)["sentence"].startswith("Holds 8.2 req/s")


def test_the_probe_says_why_it_saved_no_profile(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    save_probe_capacity(_report("bound-above"))
    err = capsys.readouterr().err
    assert "no capacity profile saved: the load generator was client-bound at c=8, c=32" in err
    assert "--cpu-pin" in err and load_profiles() == []
    save_probe_capacity(_report("pinned"))
    err = capsys.readouterr().err
    assert "saved capacity profile" in err and "no capacity profile" not in err
    assert [p.requests_per_s for p in load_profiles()] == [pytest.approx(15.0, rel=1e-3)]


def test_a_capacity_file_with_only_client_bound_steps_above_is_refused(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(_report("bound-above")))
    with pytest.raises(ConfigError, match="client-bound step does not count"):
        load_profile_file(str(f))


def test_compare_shows_a_floor_as_a_floor_with_no_change():
    floor, pinned = _report("bound-above"), _report("pinned")
    (c,) = compare([floor, pinned], ["unpinned", "pinned"])["comparisons"]
    assert c["capacity"]["at_least"] == [True, False] and c["capacity"]["change"] is None
    assert "holds ≥8.2 → 15.0 req/s (–)" in c["sentence"], c["sentence"]
    (c,) = compare([pinned, pinned], ["pinned", "again"])["comparisons"]
    assert c["capacity"]["change"] == 0.0 and "holds 15.0 → 15.0 req/s (+0%)" in c["sentence"]


@pytest.mark.parametrize(("name", "text"), [
    ("bound-below", "no step the load generator drove met the SLO"),
    ("bound-every-step", "not judged: the load generator was client-bound at every step")])
def test_every_view_says_why_no_step_met_the_slo(name, text, capsys):
    rep = _report(name)
    assert unmet_sla_text(rep) == text
    assert f"**SLA boundary:** {text}" in to_markdown(rep)
    assert f"SLA boundary: {text}" in html_report([rep])
    print_summary(rep)
    assert f"SLA boundary: {text}" in capsys.readouterr().out
    unjudged = {**rep, "steps": [{**s, "client_bound": False} for s in rep["steps"]]}
    assert unmet_sla_text(unjudged) == "no step met the SLO"
