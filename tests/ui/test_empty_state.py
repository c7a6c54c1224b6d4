"""No engine found: whole column headers, a centred hint saying what to do, one GPU line."""

from __future__ import annotations

import re

import pytest

from llmtop.model import Event
from llmtop.ui.fake import FROZEN_TIME, FakeSource
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app

GPU_LINE = "GPU unavailable: NVML library not found (is the NVIDIA driver installed?)"


def _empty_app():
    events = [Event(FROZEN_TIME, "warn", None, GPU_LINE)]
    return make_app(source=FakeSource.demo("empty", events=events))


async def _lines(app, size):
    async with app.run_test(size=size) as pilot:
        await first_paint(app, pilot)
        return screen_lines(app)


@pytest.mark.parametrize("size", [(64, 20), (80, 24), (160, 48)])
async def test_header_words_are_whole(size):
    lines = await _lines(_empty_app(), size)
    header = next(line for line in lines if line.lstrip().startswith("ENGINE"))
    assert re.search(r"\bENGINE +MODEL\b", header), header
    assert not re.search(r"\bMODE\b", header)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_centred_hint_when_nothing_found(size):
    lines = await _lines(_empty_app(), size)
    text = "\n".join(lines)
    for cmd in ("llmtop 127.0.0.1:8000", "llmtop --demo", "llmtop --prometheus URL"):
        assert cmd in text
    title = next(line for line in lines if "No inference engine found" in line)
    left, right = len(title) - len(title.lstrip()), len(title) - len(title.rstrip())
    assert abs(left - right) <= 1 and left > 5
    assert "GPU unavailable: GPU unavailable" not in text
    assert text.count("GPU unavailable:") == 2  # the GPU line and the event, once each


async def test_no_hint_with_engines():
    lines = await _lines(make_app("ok"), (80, 24))
    assert not any("No inference engine found" in line for line in lines)


@pytest.mark.parametrize("searching", [True, False])
async def test_the_hint_says_the_search_goes_on_only_where_it_does(searching):
    """No TARGET: the monitor looks again every 10 s and the hint says so; with named
    targets (or --no-discover) there is no search and no such line."""
    from llmtop.discovery import REDISCOVER_S

    src = FakeSource.demo("empty")
    src.monitor = type("M", (), {"rediscovery": type("R", (), {"every_s": REDISCOVER_S})()
                                 if searching else None})()
    lines = await _lines(make_app(source=src), (80, 24))
    said = [line for line in lines if "Looking again every 10 s" in line]
    assert bool(said) is searching
    if searching:
        assert "an engine that starts shows up here" in said[0]
