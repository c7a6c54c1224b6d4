"""The real vLLM span bodies in ``tests/fixtures/spans`` (scripts/real_vllm/capture_spans.py)."""

from __future__ import annotations

import base64
from pathlib import Path

__all__ = ["bodies", "note"]

DIR = Path(__file__).resolve().parents[1] / "fixtures" / "spans"


def bodies(name: str) -> list[bytes]:
    """The bodies of ``vllm-real-cpu-v0.32.0-<name>.b64``, as POSTed."""
    lines = (DIR / f"vllm-real-cpu-v0.32.0-{name}.b64").read_text().splitlines()
    assert lines[0].startswith("# source: ")
    return [base64.b64decode(x) for x in lines if x and not x.startswith("#")]


def note(name: str) -> str:
    """The ``# note:`` line of that fixture (what was sent)."""
    for line in (DIR / f"vllm-real-cpu-v0.32.0-{name}.b64").read_text().splitlines():
        if line.startswith("# note: "):
            return line
    return ""
