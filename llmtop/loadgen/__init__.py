"""llmtop.loadgen: the load probe engine (``api.start_probe``); its command line is
``llmtop.cli.probe`` and its charts ``llmtop.report``."""

from __future__ import annotations

__all__: list[str] = []
