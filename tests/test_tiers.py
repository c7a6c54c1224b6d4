"""The two test tiers (docs/development.md, Test tiers): the README's command deselects the
``ci_step`` tests, ``.ci/run`` runs them in a step of their own, and a test that uses a real
server's fixture lands in that tier without being marked by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]


class _Item:
    """What the collection hook reads of a test item."""

    def __init__(self, *fixtures: str, marks: tuple[str, ...] = ()) -> None:
        self.fixturenames = list(fixtures)
        self.marks = list(marks)
        self.nodeid = "tests/x.py::test"

    def get_closest_marker(self, name: str):
        return next((m for m in self.marks if m == name), None)

    def add_marker(self, mark) -> None:
        self.marks.append(mark.name)


def _marked(*fixtures: str) -> list[str]:
    item = _Item(*fixtures)
    config = pytest.Config.__new__(pytest.Config)  # the hook reads only config.option
    config.option = type("O", (), {"numprocesses": None})()
    conftest.pytest_collection_modifyitems(config, [item])
    return item.marks


def test_the_readme_command_deselects_the_ci_step_tier():
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; llmtop runs on 3.10)
    addopts = re.search(r"^addopts = (.*)$", text, re.M)
    assert addopts is not None and "-m 'not ci_step'" in addopts.group(1)
    assert re.search(r'^  "ci_step: ', text, re.M)


def test_ci_runs_the_ci_step_tier_right_after_the_readme_command():
    runs = [(i, s.partition("-m pytest")[2]) for i, s in
            enumerate((ROOT / ".ci" / "run").read_text().splitlines())
            if s.startswith(".venv/bin/python -m pytest")]
    readme = next(i for i, args in runs if "-m " not in args)  # addopts' -m alone
    tier = next(i for i, args in runs if "-m ci_step" in args)
    hostile = next(i for i, args in runs if "-m hostile" in args)
    assert readme < tier < hostile


@pytest.mark.parametrize("fixture", ["demo_fleet", "fleet_backend", "prometheus_bin",
                                     "victoria_bin", "browser"])
def test_a_real_server_fixture_puts_a_test_in_the_ci_step_tier(fixture):
    assert "ci_step" in _marked("tmp_path", fixture)


def test_a_test_without_one_stays_in_the_fast_tier():
    assert "ci_step" not in _marked("tmp_path", "monkeypatch", "fleet_fixture")


REAL_SERVERS = {
    "demo_fleet": "demo engines scraped by a real Prometheus (tests/fleet/conftest.py)",
    "prometheus_bin": "a Prometheus binary", "victoria_bin": "a VictoriaMetrics binary",
    "prometheus_server": "a real Prometheus", "victoria_server": "a real VictoriaMetrics",
    "fleet_backend": "a real Prometheus or VictoriaMetrics",
    "linked_fleet": "a real Prometheus (tests/fleet/test_gpulink.py)",
    "traps_prom": "a real Prometheus (tests/fleet/test_traps.py)",
    "bare_fleet": "a real Prometheus or VictoriaMetrics (tests/fleet/test_trtllm_bare.py)",
    "browser": "headless Chromium (tests/loadgen/test_bakeoff_chromium.py)",
}
"""The fixtures that start a real server, stated here apart from ``CI_STEP_FIXTURES`` (the
list the marking reads), so that a fixture dropped there shows up in what is collected."""

_PROBE = """
import json, os

def pytest_collection_finish(session):
    with open(os.environ["LLMTOP_TIER_PROBE"], "w") as f:
        json.dump([{"id": i.nodeid, "fixtures": sorted(getattr(i, "fixturenames", ())),
                    "ci_step": i.get_closest_marker("ci_step") is not None}
                   for i in session.items], f)
"""


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """What pytest collects (after ``-m``) with the README's command's addopts, and with
    ``-m ci_step``: each test's id, fixtures (all it uses, through other fixtures too) and
    whether it is marked ``ci_step``. Both collections run at once, in subprocesses."""
    d = tmp_path_factory.mktemp("tiers")
    (d / "llmtop_tier_probe.py").write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(d), str(ROOT)])
    procs = {}
    for tier, extra in (("readme", []), ("ci_step", ["-m", "ci_step"])):
        out = d / f"{tier}.json"
        procs[tier] = (out, subprocess.Popen(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p",
             "no:cacheprovider", "-p", "llmtop_tier_probe", *extra, "tests"],
            cwd=ROOT, env={**env, "LLMTOP_TIER_PROBE": str(out)},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    got = {}
    for tier, (out, proc) in procs.items():
        log, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, log[-3000:]
        got[tier] = json.loads(out.read_text())
    return got


def test_what_the_readme_command_collects_needs_no_real_server(tiers):
    """Judged by what is collected: marking after ``-m`` deselects (or a fixture missing from
    ``CI_STEP_FIXTURES``) puts real-server tests here."""
    readme = tiers["readme"]
    assert len(readme) > 1000  # the fast tier is there at all
    assert [t["id"] for t in readme if t["ci_step"]] == []
    assert [(t["id"], sorted(REAL_SERVERS.keys() & t["fixtures"])) for t in readme
            if REAL_SERVERS.keys() & t["fixtures"]] == []


def test_every_real_server_test_is_in_the_ci_step_tier(tiers):
    readme = {t["id"] for t in tiers["readme"]}
    ci_step = {t["id"]: t for t in tiers["ci_step"]}
    assert not readme & ci_step.keys()  # each test in one tier
    assert all(t["ci_step"] for t in ci_step.values())
    for f in ("demo_fleet", "prometheus_bin", "linked_fleet", "traps_prom", "bare_fleet",
              "browser"):  # the others are reached through request.getfixturevalue
        assert any(f in t["fixtures"] for t in ci_step.values()), f
    assert set(conftest.CI_STEP_FIXTURES) >= REAL_SERVERS.keys()
