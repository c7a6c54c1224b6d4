"""Screens and widgets never import the app module (``ui/app.py`` imports them): they get a
``LiveView`` when made. Checked on the source, TYPE_CHECKING blocks and function bodies too."""

from __future__ import annotations

import ast
from pathlib import Path

import llmtop.ui

UI = Path(llmtop.ui.__file__).parent


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_no_screen_or_widget_imports_the_app():
    files = sorted([*UI.glob("screens/*.py"), *UI.glob("widgets/*.py"), UI / "view.py"])
    assert len(files) > 5
    bad = {f.name: m for f in files for m in _imports(f) if m == "llmtop.ui.app"}
    assert bad == {}


def _module(path: Path) -> str:
    parts = path.relative_to(UI.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_cycle_inside_ui():
    """No chain of imports (lazy ones included) leads a ui module back to itself."""
    deps = {_module(f): {m for m in _imports(f) if m.startswith("llmtop.ui")}
            for f in UI.rglob("*.py")}
    cycles = []

    def visit(mod: str, path: list[str]) -> None:
        for d in deps.get(mod, ()):
            if d == path[0]:
                cycles.append(" -> ".join([*path, d]))
            elif d not in path:
                visit(d, [*path, d])

    for mod in deps:
        visit(mod, [mod])
    assert cycles == []
