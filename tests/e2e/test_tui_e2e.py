"""End to end: the TUI on the real live source (``ui.live.make_source``: Monitor, Scraper,
Store, GPU sampler) against a healthy vLLM and misbehaving servers, headless. It keeps
running, paints every state and the healthy numbers, and raises nothing."""

from __future__ import annotations

import re
import time

from tests.e2e.conftest import needs_parsers
from tests.e2e.servers import closed_port

pytestmark = needs_parsers


async def test_tui_shows_every_state_beside_the_healthy_engine(servers):
    from llmtop.cli import build_parser
    from llmtop.settings import build_config
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.live import make_source

    cases = ["healthy", "restart", "http_500", "http_401", "html", "garbage", "truncated",
             "huge_declared", "nan", "slow"]
    ports = servers.start(cases)
    targets = [f"127.0.0.1:{ports[c]}" for c in cases] + [f"127.0.0.1:{closed_port()}"]
    args = build_parser().parse_args(["--interval", "0.3", "--timeout", "2", *targets])
    config = build_config(args, environ={"XDG_CONFIG_HOME": "/nonexistent-llmtop-e2e"})
    source, problems = make_source(config, args=args)
    assert problems == []
    app = LlmtopApp(source, config, theme="mono")
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            deadline = time.monotonic() + 12
            states: dict[str, str] = {}
            while time.monotonic() < deadline:
                await pilot.pause(0.3)
                snap = app.snapshot
                if snap is None:
                    continue
                states = {r.target: r.state for r in snap.engines}
                healthy = next(r for r in snap.engines
                               if r.target == f"127.0.0.1:{ports['healthy']}")
                if healthy.generation_tokens_per_s and len(states) == len(targets):
                    break
            await pilot.pause(0.6)  # one more paint
            screen = app.export_screenshot()
            await pilot.press("g")  # the GPU screen with its unavailable line
            await pilot.pause(0.3)
            gpu_screen = app.export_screenshot()
    finally:
        await source.aclose()
    assert states[f"127.0.0.1:{ports['healthy']}"] == "ok"
    assert states[f"127.0.0.1:{ports['http_500']}"] == "http_error"
    assert states[f"127.0.0.1:{ports['http_401']}"] == "unauthorized"
    assert states[f"127.0.0.1:{ports['html']}"] == "bad_payload"
    assert states[f"127.0.0.1:{ports['restart']}"] in ("restarted", "ok")
    text = re.sub(r"&#160;|\s+", " ", screen)
    for word in ("DOWN", "BAD PAYLOAD", "UNAUTHORIZED", "tiny-llama"):
        assert word in text, word
    assert "HTTP 500" in text or "HTTP" in text
    assert "Traceback" not in screen and "Traceback" not in gpu_screen
    assert re.search(r"unavailable|NVML|GPU", re.sub(r"&#160;|\s+", " ", gpu_screen))
