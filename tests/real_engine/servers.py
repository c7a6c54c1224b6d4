"""Where the real servers of ``scripts/real_*`` are, and how a test waits on them.

Each real server is named by an environment variable that ``.ci/run`` sets after starting it.
Without it a test skips with the reason; with ``LLMTOP_REQUIRE_REAL_ENGINES=1`` (set by CI)
it fails instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

__all__ = ["llmtop", "need_env"]

REQUIRE = os.environ.get("LLMTOP_REQUIRE_REAL_ENGINES") == "1"


def need_env(name: str, hint: str) -> str:
    """The value of ``name``; skip (or fail under ``LLMTOP_REQUIRE_REAL_ENGINES=1``) if unset."""
    value = os.environ.get(name, "")
    if not value:
        msg = f"set {name} ({hint})"
        if REQUIRE:
            pytest.fail(f"LLMTOP_REQUIRE_REAL_ENGINES=1 but {msg}")
        pytest.skip(msg)
    return value


def llmtop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the ``llmtop`` CLI of this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "llmtop", *args], capture_output=True, text=True, timeout=timeout
    )
