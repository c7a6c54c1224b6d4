"""Generate ``screenshots/*.svg``: one per main screen, and the overview in every theme.

    .venv/bin/python scripts/screenshots.py            # fixed FakeSource data (deterministic)
    .venv/bin/python scripts/screenshots.py --demo     # live demo engines (llmtop --demo)
    .venv/bin/python scripts/screenshots.py --only stack router-detail   # some shots only

Uses ``App.save_screenshot`` after driving the app with a Pilot (no terminal needed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
os.environ.setdefault("TZ", "UTC")
time.tzset()

from llmtop.config import Config  # noqa: E402
from llmtop.ui.app import LlmtopApp  # noqa: E402
from llmtop.ui.fake import FakeSource  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "screenshots"
SIZE = (160, 48)

SHOTS = [
    # (file name, scenario, theme, keys)
    ("overview-dark", "pressure", "dark", ()),
    ("overview-light", "pressure", "light", ()),
    ("overview-high-contrast", "pressure", "high-contrast", ()),
    ("overview-mono", "pressure", "mono", ()),
    ("overview-80x24", "down", "dark", ()),
    ("engine-detail", "ok", "dark", ("down", "down", "enter")),
    ("raw-metrics", "ok", "dark", ("down", "down", "enter", "m")),
    ("gpu-detail", "ok", "dark", ("g",)),
    ("help", "ok", "dark", ("question_mark",)),
    ("probe", "ok", "dark", ("down", "down", "l")),
    ("overview-capacity", "headroom", "dark", ("down", "down")),  # the CAP column, README
    ("requests", "requests", "dark", ("r",)),
    ("requests-80x24", "requests", "dark", ("r",)),
    ("stack", "stack", "dark", ()),
    ("stack-80x24", "stack", "dark", ()),
    ("router-detail", "stack", "dark", ("down", "down", "down", "enter")),
    ("gpu-activity", "gpu", "dark", ("g",)),  # GPU truth: SM/tensor/DRAM beside busy time
    ("gpu-activity-80x24", "gpu", "dark", ("g",)),
    ("engine-gpu-work", "gpu", "dark", ("down", "down", "enter")),  # MBU/MFU, the peak
    ("log-view", "logs", "dark", ("down", "down", "L")),  # the vLLM's log, following
    ("log-down", "logs_down", "dark", ("down", "down", "enter")),  # DOWN with its log line
    ("log-mark", "logs", "dark", ("down", "down")),  # new log errors marked, sparkline strip
]
SIZES = {"overview-80x24": (80, 24), "overview-capacity": (100, 24), "requests-80x24": (80, 24),
         "stack-80x24": (80, 24), "gpu-activity-80x24": (80, 24), "engine-gpu-work": (100, 30),
         "log-view": (80, 24), "log-down": (80, 24)}
"""Shots not at ``SIZE``."""


async def shoot(name: str, app: LlmtopApp, keys: tuple[str, ...], size: tuple[int, int],
                ticks: int, *, out: Path = OUT, between_s: float = 0.0) -> Path:
    """Poll ``ticks`` times (``between_s`` apart), press ``keys``, save ``out/name.svg``."""
    async with app.run_test(size=size) as pilot:
        for _ in range(ticks):
            await app.poll_once()
            await pilot.pause()
            if between_s:
                await asyncio.sleep(between_s)
        app.paint()
        await pilot.pause()
        for k in keys:
            await pilot.press(k)
            await pilot.pause()
        app.paint()
        await pilot.pause()
        app.save_screenshot(filename=f"{name}.svg", path=str(out))
    return out / f"{name}.svg"


async def main_async(demo: bool, only: list[str] | None = None) -> None:
    OUT.mkdir(exist_ok=True)
    handle = None
    if demo:
        from llmtop.demo.launcher import start_demo
        from llmtop.ui.live import make_source

        handle = start_demo()
        config = handle.apply(Config(discover=False))
    try:
        for name, scenario, theme, keys in SHOTS:
            if only and name not in only:
                continue
            size = SIZES.get(name, SIZE)
            if handle is not None:
                source, _ = make_source(config, demo=handle)
                app = LlmtopApp(source, config, autopoll=False, theme=theme)
                ticks = 5
            else:
                app = LlmtopApp(FakeSource.demo(scenario), Config(), autopoll=False,
                                theme=theme)
                ticks = 1
            path = await shoot(name, app, keys, size, ticks)
            print(f"wrote {path.relative_to(OUT.parent)}")
    finally:
        if handle is not None:
            handle.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description="Generate screenshots/*.svg")
    ap.add_argument("--demo", action="store_true", help="use the live demo engines")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these shots (file names)")
    args = ap.parse_args()
    asyncio.run(main_async(args.demo, args.only))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
