"""Shared test helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_text(name: str) -> str:
    """Text of ``tests/fixtures/metrics/NAME`` (or a path relative to ``tests/fixtures``)."""
    p = FIXTURES / "metrics" / name
    if not p.exists():
        p = FIXTURES / name
    return p.read_text(encoding="utf-8")


@pytest.fixture
def fixture_loader():
    """The ``fixture_text`` function, as a fixture."""
    return fixture_text
