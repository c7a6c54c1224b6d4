"""Command-line faces of llmtop: the top floor.

``main`` is the ``llmtop`` entry point; ``record``, ``probe`` and ``demo`` hold the
subcommands' parsers. Only this package drives the layers below (ui, record, loadgen,
console, demo); nothing below imports it.
"""

from __future__ import annotations

from llmtop.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
