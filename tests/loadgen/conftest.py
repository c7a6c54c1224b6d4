"""Fixtures of the probe tests: local mock servers (separate processes, 127.0.0.1 only)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from mock_server import start_mock

from llmtop.loadgen.worker import run_probe


@pytest.fixture(scope="session")
def slow_mock():
    """TTFT 200 ms, ITL 20 ms, with /tokenize."""
    with start_mock(ttft=0.2, itl=0.02, tokenize=True, retry_after=1.0) as m:
        yield m


@pytest.fixture(scope="session")
def fast_mock():
    """TTFT 10 ms, ITL 2 ms, no /tokenize (calibration from usage)."""
    with start_mock(ttft=0.01, itl=0.002, retry_after=0.5) as m:
        yield m


async def probe(options):
    """Run a probe in this process; returns (report, events)."""
    events: list[dict] = []
    report = await run_probe(options, events.append)
    return report, events
