"""The import contracts of ``pyproject.toml`` ([tool.importlinter]) hold: layers point down
only, data layers never import textual or rich, diagnosis is pure, no sibling cycles.

Runs the venv's ``lint-imports`` (import-linter, in the ``test`` extra) without a cache; its
report is shown on failure, naming the import that broke which contract.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(config: Path) -> subprocess.CompletedProcess[str]:
    if not LINT.exists():
        pytest.fail(f"{LINT} is missing: install the test extra (pip install -e '.[test]')")
    return subprocess.run([str(LINT), "--config", str(config), "--no-cache"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_contracts_in_pyproject_hold():
    out = _lint(ROOT / "pyproject.toml")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_a_broken_contract_fails(tmp_path):
    """The check can fail: a contract the code breaks (the TUI imports textual) is reported."""
    cfg = tmp_path / "broken.toml"
    cfg.write_text(
        '[tool.importlinter]\nroot_package = "llmtop"\ninclude_external_packages = true\n\n'
        '[[tool.importlinter.contracts]]\nname = "ui without textual"\ntype = "forbidden"\n'
        'source_modules = ["llmtop.ui"]\nforbidden_modules = ["textual"]\n',
        encoding="utf-8",
    )
    out = _lint(cfg)
    assert out.returncode != 0
    assert "ui without textual BROKEN" in out.stdout


def _no_cycles_counting_type_checking(tmp_path: Path) -> Path:
    """pyproject's ``no-cycles`` contract, with the imports under ``TYPE_CHECKING`` counted
    (the project's settings leave them out, for the layers)."""
    import json
    import re

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text.split('id = "no-cycles"', 1)[1].split("[[", 1)[0]
    ignored = re.findall(r'^\s*"([\w.]+ -> [\w.]+)",?\s*$', block, re.M)  # (py3.10: no tomllib)
    cfg = tmp_path / "no_cycles.toml"
    cfg.write_text(
        '[tool.importlinter]\nroot_package = "llmtop"\ninclude_external_packages = true\n'
        "exclude_type_checking_imports = false\n\n"
        '[[tool.importlinter.contracts]]\nname = "no cycles, type hints counted"\n'
        'type = "acyclic_siblings"\nancestors = ["llmtop"]\n'
        f"ignore_imports = {json.dumps(ignored)}\n"
        'unmatched_ignore_imports_alerting = "warn"\n', encoding="utf-8")
    return cfg


def test_no_cycles_even_through_type_hints(tmp_path):
    """A module that takes a higher one back only for its type hints is a cycle too (the
    fleet's pinned/record/warm took ``FleetMonitor`` back): none, and no ignore for one."""
    out = _lint(_no_cycles_counting_type_checking(tmp_path))
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "KEPT" in out.stdout
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "llmtop.fleet." not in text.split('id = "no-cycles"', 1)[1].split("[[", 1)[0]


def test_a_type_hint_cycle_is_found(tmp_path):
    """The check above can fail: a package whose modules take each other back, one of them
    only under ``TYPE_CHECKING``, is reported."""
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                              "    from cyc import a\n")
    cfg = tmp_path / "cyc.toml"
    cfg.write_text('[tool.importlinter]\nroot_package = "cyc"\n'
                   "exclude_type_checking_imports = false\n\n"
                   '[[tool.importlinter.contracts]]\nname = "cyc acyclic"\n'
                   'type = "acyclic_siblings"\nancestors = ["cyc"]\n', encoding="utf-8")
    out = subprocess.run([str(LINT), str(cfg), "--no-cache"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, out.stdout
    assert "cyc acyclic BROKEN" in out.stdout
