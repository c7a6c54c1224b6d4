"""Load colour themes (``themes/*.toml``) into Textual ``Theme`` objects.

Shipped themes come from the installed package (``llmtop/_themes``, force-included by the
build) or, in a development checkout, from the repository's ``themes/`` folder. User themes
in ``$XDG_CONFIG_HOME/llmtop/themes/`` override or extend them.
"""

from __future__ import annotations

import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "BUILTIN_ORDER",
    "DEFAULT_THEME",
    "GAUGE_DEFAULTS",
    "load_themes",
    "theme_from_toml",
    "user_theme_dir",
]

DEFAULT_THEME = "dark"
BUILTIN_ORDER = ("dark", "light", "high-contrast", "mono")
"""The order ``t`` cycles through; user themes follow."""

GAUGE_DEFAULTS = {"gauge-ok": "#5fd75f", "gauge-warn": "#ffaf00", "gauge-crit": "#ff5f5f"}
"""App variable fallbacks when a theme does not set them."""

_COLOR_KEYS = ("primary", "secondary", "accent", "foreground", "background", "surface",
               "panel", "success", "warning", "error", "boost")


def theme_from_toml(text: str, fallback_name: str) -> Theme:
    """One theme file -> ``Theme``. Raises ``ValueError`` on a malformed file."""
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc)) from exc
    colors = data.get("colors", {})
    if "primary" not in colors:
        raise ValueError("theme needs colors.primary")
    kw = {k: str(colors[k]) for k in _COLOR_KEYS if k in colors}
    variables = {str(k): str(v) for k, v in data.get("variables", {}).items()}
    return Theme(name=str(data.get("name", fallback_name)), dark=bool(data.get("dark", True)),
                 variables=variables, **kw)


def user_theme_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "llmtop" / "themes"


def _shipped_files() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    try:
        pkg = resources.files("llmtop") / "_themes"
        if pkg.is_dir():
            out = [(p.name, p.read_text("utf-8")) for p in pkg.iterdir()
                   if p.name.endswith(".toml")]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        out = []
    if not out:
        repo = Path(__file__).resolve().parents[2] / "themes"
        if repo.is_dir():
            out = [(p.name, p.read_text("utf-8")) for p in sorted(repo.glob("*.toml"))]
    return out


def load_themes(user_dir: Path | None = None) -> tuple[list[Theme], list[str]]:
    """All themes in cycle order, and one error line per user theme file that failed."""
    found: dict[str, Theme] = {}
    errors: list[str] = []
    for name, text in _shipped_files():
        t = theme_from_toml(text, name.removesuffix(".toml"))
        found[t.name] = t
    udir = user_dir or user_theme_dir()
    if udir.is_dir():
        for p in sorted(udir.glob("*.toml")):
            try:
                t = theme_from_toml(p.read_text("utf-8"), p.stem)
            except (OSError, ValueError, TypeError) as exc:
                errors.append(f"theme {p.name}: {exc}")
                continue
            found[t.name] = t
    order = [n for n in BUILTIN_ORDER if n in found] + sorted(
        n for n in found if n not in BUILTIN_ORDER)
    return [found[n] for n in order], errors
