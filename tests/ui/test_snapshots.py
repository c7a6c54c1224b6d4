"""Snapshot tests (pytest-textual-snapshot) at 80x24 and 160x48, from fixed FakeSource data.

Deterministic: frozen data and clock (UTC), fixed host name, TEXTUAL_ANIMATIONS=none, no
focused Input (no cursor blink). Update with ``pytest tests/ui --snapshot-update`` and review
the SVG diff.
"""

from __future__ import annotations

import pytest

from llmtop.gpu.reasons import LIBRARY_NOT_FOUND
from llmtop.model import Event
from llmtop.ui.fake import FROZEN_TIME, FakeSource

from .conftest import first_paint, make_app

SIZES = [(80, 24), (160, 48)]


def _run(*keys: str):
    """First paint, then ``keys``; a pushed screen then sits over a live overview: the data
    are polled and every screen in the stack painted twice more."""
    async def run_before(pilot) -> None:
        await first_paint(pilot.app, pilot)
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        for _ in range(2 if keys else 0):
            await pilot.app.poll_once()
            await pilot.pause()
            pilot.app.paint()
        pilot.app.paint()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview(snap_compare, size):
    assert snap_compare(make_app("ok"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_pressure(snap_compare, size):
    assert snap_compare(make_app("pressure"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_gpu(snap_compare, size):
    assert snap_compare(make_app("no_gpu"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_target_down(snap_compare, size):
    assert snap_compare(make_app("down"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_state_badges(snap_compare, size):
    """One row per badge: BAD PAYLOAD, RESTARTED, STALE 125s, HTTP 503, UNAUTHORIZED, DOWN."""
    assert snap_compare(make_app("states"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare, size):
    assert snap_compare(make_app("ok"), terminal_size=size, run_before=_run("question_mark"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_light_theme(snap_compare, size):
    assert snap_compare(make_app("ok", theme="light"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_engine_detail(snap_compare, size):
    assert snap_compare(make_app("ok"), terminal_size=size,
                        run_before=_run("down", "down", "enter"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_raw_metrics(snap_compare, size):
    """Fits the width: names cut with a kept suffix at 80 columns, the selection in full."""
    assert snap_compare(make_app("ok"), terminal_size=size,
                        run_before=_run("down", "down", "enter", "m", "down", "down"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_detail(snap_compare, size):
    assert snap_compare(make_app("ok"), terminal_size=size, run_before=_run("g"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_nothing_found(snap_compare, size):
    """No engine, no NVML: whole headers, the centred hint, the GPU reason said once."""
    events = [Event(FROZEN_TIME, "warn", None, LIBRARY_NOT_FOUND)]
    app = make_app(source=FakeSource.demo("empty", events=events))
    assert snap_compare(app, terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_throttled(snap_compare, size):
    """GPU 0 power-capped: the reason in words; GPU 1 selected (its history below)."""
    assert snap_compare(make_app("pressure"), terminal_size=size, run_before=_run("g", "down"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_unavailable(snap_compare, size):
    assert snap_compare(make_app("no_gpu"), terminal_size=size, run_before=_run("g"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_requests(snap_compare, size):
    """The window's requests slowest TTFT first, the shape above, FINISH folded at 80."""
    assert snap_compare(make_app("requests"), terminal_size=size, run_before=_run("r"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_stack_overview(snap_compare, size):
    """Two routers with their backends (and P/D pools) under them (issue 42)."""
    assert snap_compare(make_app("stack"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_gpu_activity(snap_compare, size):
    """GPU 0 leads with SM activity, tensor and DRAM beside its busy time (100 % busy at 23 %
    SM); GPU 1 without GPM shows busy time labelled as such, and 35 % of power throttling."""
    assert snap_compare(make_app("gpu"), terminal_size=size, run_before=_run())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_activity(snap_compare, size):
    """The GPU screen with SM/tensor/DRAM/busy columns, per-process busy time, the H100's
    activity details (GPM, occupancy, FP16, NVLink, clocks held)."""
    assert snap_compare(make_app("gpu"), terminal_size=size, run_before=_run("g"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_gpu_without_gpm(snap_compare, size):
    """The A100 selected: its details say why there is no activity (the sampler's note)."""
    assert snap_compare(make_app("gpu"), terminal_size=size, run_before=_run("g", "down"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_engine_gpu_work(snap_compare, size):
    """vLLM's detail: achieved GB/s and TFLOP/s, MBU/MFU with the peak and its source, its
    GPU's DRAM activity beside them, and at capacity with MBU 12 %: not the GPU."""
    assert snap_compare(make_app("gpu"), terminal_size=size,
                        run_before=_run("down", "down", "enter"))
