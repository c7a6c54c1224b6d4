"""The two test tiers (docs/development.md, Test tiers): the README's command deselects the
``ci_step`` tests, ``.ci/run`` runs them in a step of their own, and a test that uses a real
server's fixture lands in that tier without being marked by hand."""

from __future__ import annotations

import re
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
