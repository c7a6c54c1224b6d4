"""The probe screen's live curves (plotext) at 80x24: a snapshot, and the chart's content."""

from __future__ import annotations

import pytest

from llmtop.config import Config, Target
from llmtop.ui.screens.probe import ProbeScreen, live_marks

from .conftest import first_paint
from .test_probe_screen import FakeHandle, Options, _step

pytest.importorskip("textual_plotext")

TARGET = Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000")
LADDER = (1, 2, 4, 8, 16, 32, 64)


def _steps() -> list[dict]:
    out = []
    for i, c in enumerate(LADDER):
        s = _step(c, 100.0 * min(c, 16), 0.02 * c)
        s.update(index=i, requests=10 * c, partial=False, itl_request_s=s["itl_s"],
                 error_rate=0.0)
        out.append(s)
    return out


class QuietHandle(FakeHandle):
    """A running probe that reports nothing more (the test sets the steps)."""

    def poll(self):
        return []


def _app():
    from .conftest import make_app

    return make_app(config=Config(targets=(TARGET,)))


async def _run(pilot, chart_presses: int = 0) -> ProbeScreen:
    app = pilot.app
    await first_paint(app, pilot)
    screen = ProbeScreen(TARGET.name, starter=QuietHandle, options_cls=Options)
    app.push_screen(screen)
    await pilot.pause()
    screen.query_one("#pf-ttft_slo").value = "0.5"
    await pilot.press("ctrl+r")
    await pilot.pause()
    screen.steps = _steps()
    for _ in range(chart_presses):
        await pilot.press("v")
    screen.refresh_data()
    await pilot.pause()
    return screen


def test_live_marks_find_knee_and_sla():
    assert live_marks(_steps(), 0.5) == (16, 16)
    assert live_marks(_steps()[:3], None) == (None, None)


async def test_chart_draws_curves_marks_and_slo_at_80x24():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _run(pilot)
        assert not screen.query_one("#probe-form").display  # hidden while running
        chart = screen.query_one("#probe-chart")
        text = chart.plt.build()
        assert "out tok/s vs load" in text and "K=c=16" in text and "S=c=16" in text
        assert "c=1" in text and "1.6k" in text
        await pilot.press("v")
        await pilot.pause()
        assert chart.kind == "ttft" and "TTFT ms vs load" in chart.plt.build()
        assert chart.size.width >= 36 and chart.size.height >= 7
        await pilot.press("f")
        await pilot.pause()
        assert screen.query_one("#probe-form").display


def test_probe_chart_snapshot_80x24(snap_compare):
    async def run_before(pilot) -> None:
        await _run(pilot, chart_presses=1)
        pilot.app.paint()
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(80, 24), run_before=run_before)


async def test_finished_probe_states_the_capacity_answer():
    app = _app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _run(pilot)
        steps = _steps()
        report = {"steps": steps, "options": {"sweep": True},
                  "saturation": {"concurrency": 16, "step": 4, "knee_load": 15.0,
                                 "output_tokens_per_s": 1600.0, "requests_per_s": 16.0},
                  "sla_boundary": {"concurrency": 16, "step": 4, "met": True,
                                   "slo": {"ttft": 0.5}, "requests_per_s": 16.0,
                                   "output_tokens_per_s": 1600.0, "goodput_per_s": 16.0}}
        screen._finish(report)
        await pilot.pause()
        assert ("Holds 16.0 req/s (1,600 output tok/s) of this traffic with TTFT p95 \u2264 "
                "500 ms; saturates at c=16.") in screen.status
