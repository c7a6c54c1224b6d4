"""Fixtures of the end-to-end tests: the loopback case servers and a ``llmtop`` runner."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import ServerSet

REPO = Path(__file__).resolve().parents[2]


def parsers_missing() -> str | None:
    """Why the real parsers cannot run yet (a module has not landed), or None."""
    for mod in ("llmtop.parse.registry", "llmtop.parse.detect", "llmtop.parse.vllm"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} has not landed yet"
    return None


needs_parsers = pytest.mark.skipif(parsers_missing() is not None,
                                   reason=parsers_missing() or "")


def nvml_works() -> bool:
    """True when NVML initializes here (a GPU machine): GPU-absence tests do not apply."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


@dataclass
class Run:
    """One finished ``python -m llmtop`` process."""

    argv: list[str]
    rc: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        def no_constants(name: str) -> Any:
            raise AssertionError(f"{name} in --once --json output")

        return json.loads(self.stdout, parse_constant=no_constants)

    def rows(self) -> dict[str, dict[str, Any]]:
        """Engine rows by target name (the first row of each target)."""
        out: dict[str, dict[str, Any]] = {}
        for row in self.json()["engines"]:
            out.setdefault(row["target"], row)
        return out


def run_llmtop(*args: str, timeout: float = 30.0, env: dict[str, str] | None = None) -> Run:
    """``python -m llmtop ARGS`` from the repository root, with no config file or API key
    from the environment of the person running the tests."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("LLMTOP_") and k not in ("XDG_CONFIG_HOME",)}
    e["XDG_CONFIG_HOME"] = str(REPO / "tests" / "e2e" / "no-config-here")
    e["PYTHONPATH"] = str(REPO)
    if env:
        e.update(env)
    argv = [sys.executable, "-m", "llmtop", *args]
    p = subprocess.run(argv, cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout)
    return Run(argv, p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="session")
def servers():
    """Every case server of ``tests.e2e.servers`` started on demand (``servers.start``)."""
    s = ServerSet()
    yield s
    s.close()
