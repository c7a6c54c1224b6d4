"""Issue 15 on the probe screen: whole headers at 80x24, the sweep box shows its real state."""

from __future__ import annotations

import io

from rich.console import Console

from llmtop.config import Config, Target
from llmtop.ui.screens.probe import STEP_COLUMNS, ProbeScreen, step_chart

from .conftest import first_paint, make_app


def _step(c: int) -> dict:
    q = {"p50": 0.05, "p90": 0.1, "p95": 0.123, "p99": 0.2, "mean": 0.06}
    return {"concurrency": c, "achieved_concurrency": c * 0.98, "output_tokens_per_s": 1234.5 * c,
            "ttft_s": q, "errors": {}, "client_bound": c == 64}


def test_step_table_headers_whole_at_80x24():
    out = io.StringIO()
    Console(file=out, width=38).print(step_chart([_step(c) for c in (1, 8, 64, 256)], 38))
    text = out.getvalue()
    assert "\u2026" not in text, text
    for col in STEP_COLUMNS:
        assert f" {col}" in text
    assert "c=256" in text and "! = client-bound" in text


async def test_sweep_checkbox_shows_its_real_state():
    cfg = Config(targets=(Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"),))
    app = make_app(config=cfg)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        screen = ProbeScreen("vllm@127.0.0.1:8000", starter=lambda o: None, options_cls=None)
        app.push_screen(screen)
        await pilot.pause()
        box = screen.query_one("#pf-sweep")
        assert not box.value and "X" not in str(box.render())  # fixed mode: unchecked
        box.value = True
        await pilot.pause()
        assert "X" in str(box.render())
