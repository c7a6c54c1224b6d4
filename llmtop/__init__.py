"""llmtop: htop for LLM inference servers.

The package root re-exports the data layer only; it never imports the UI.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
