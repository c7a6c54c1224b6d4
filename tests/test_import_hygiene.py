"""The data layers never import textual or rich (STYLE.md: layers enforced by tools)."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import llmtop

ROOT = Path(__file__).resolve().parent.parent
UI_PACKAGES = ("llmtop.ui", "llmtop.console")


def _data_modules() -> list[str]:
    mods = []
    for info in pkgutil.walk_packages(llmtop.__path__, "llmtop."):
        if info.name.startswith(UI_PACKAGES) or info.name == "llmtop.__main__":
            continue
        mods.append(info.name)
    return sorted(mods)


def test_data_modules_do_not_import_textual_or_rich():
    mods = _data_modules()
    assert "llmtop.model" in mods and "llmtop.cli" in mods
    # httpx's package __init__ imports its optional CLI (click, rich, pygments) when click is
    # installed: on such a machine rich arrives through httpx, not through llmtop. Hide click
    # so the check sees only what llmtop's own modules import, on every machine.
    code = (
        "import importlib, sys\n"
        "sys.modules['click'] = None\n"
        f"for m in {mods!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"UI libraries imported by data modules: {out.stdout}"


def test_console_never_imports_textual():
    for path in (ROOT / "llmtop" / "console").rglob("*.py"):
        text = path.read_text()
        assert "import textual" not in text and "from textual" not in text, path


def test_ruff_layer_rule_holds():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        import pytest

        pytest.skip("ruff not installed")
    out = subprocess.run(
        [ruff, "check", "--select", "TID251", "llmtop"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr
