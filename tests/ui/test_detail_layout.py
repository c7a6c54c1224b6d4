"""Engine detail at 80 columns: section titles on one line, long titles cut with ``…``."""

from __future__ import annotations

from dataclasses import replace

from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.screens.detail import EngineDetailScreen
from llmtop.ui.screens.raw import RawMetricsScreen
from llmtop.ui.textshot import screen_lines

from .conftest import first_paint, make_app


async def test_section_titles_stay_on_one_line():
    """A narrow table (finish reasons, cache configuration) used to wrap its own title."""
    app = make_app()
    async with app.run_test(size=(80, 120)) as pilot:  # tall: the whole body on screen
        await first_paint(app, pilot)
        await pilot.press("enter")  # sglang: one finish reason, one cache setting
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        lines = [line.strip() for line in screen_lines(app)]
        for title in ("Latency by window (lifetime = since process start)",
                      "Fields (window of the overview)", "Finish reasons (window)",
                      "Request phases, p50 / p95",
                      "Token lengths, p50 / p90 (step = tokens per engine step)",
                      "Cache configuration"):
            assert title in lines, title
        assert "reasons" not in lines and "configuration" not in lines


async def test_long_target_titles_end_with_an_ellipsis():
    snap = demo_snapshot()
    target = "vllm@gpu-node-17.cluster.example.internal:8000"
    model = "meta-llama/Llama-3.3-70B-Instruct-FP8-dynamic"
    snap.engines[0] = replace(snap.engines[0], key=f"{target}|{model}", target=target,
                              model=model, ranks=[])
    app = make_app(source=FakeSource(snap))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineDetailScreen)
        title = screen_lines(app)[0]
        assert title.startswith(f" Engine detail: {target}  meta-llama/")
        assert title.rstrip().endswith("…") and len(title.rstrip()) <= 80
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, RawMetricsScreen)
        assert screen_lines(app)[0].startswith(f" Raw metrics: {target}")
