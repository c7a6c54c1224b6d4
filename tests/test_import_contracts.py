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
