"""CPU per scrape: llmtop's ``Scraper`` over its lean http:// transport vs httpx's own.

Starts one demo vLLM (``llmtop.demo.launcher.start_demo``, a separate process, ~55 KB
``/metrics``), then times ``Scraper.scrape`` back to back in this process:

  * ``lean``   - the default: a request built once, sent straight to
    ``plainhttp.PlainHTTPTransport`` (plain http, no proxy);
  * ``client`` - the same transport under httpx.AsyncClient's client layer (what a redirecting
    URL or a proxied target takes);
  * ``httpx``  - the Scraper handed ``httpx.AsyncHTTPTransport()`` (httpcore + anyio + h11).

    .venv/bin/python benchmarks/scrape_cost.py [--requests 300] [--repeat 3]

Prints ms of this process's CPU time per scrape (each repeat, then the best), and the body
size. The demo runs in its own process, so its CPU is not counted. The machine may be
shared: compare numbers from the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from llmtop.config import Config  # noqa: E402
from llmtop.demo.launcher import start_demo  # noqa: E402
from llmtop.sources.scrape import Scraper  # noqa: E402


async def per_scrape_ms(config: Config, transport, n: int, repeat: int, *, direct: bool = True
                        ) -> tuple[list[float], int]:
    target = config.targets[0]
    scraper = Scraper(config, transport=transport, defer_identity=True)
    try:
        for _ in range(3):  # connect, identity, warm caches
            await scraper.scrape(target)
            await asyncio.sleep(0.2)
        if not direct:
            scraper._http._lean.clear()  # no lean transport known: every scrape takes the client
        runs, size = [], 0
        for _ in range(repeat):
            t0 = time.process_time()
            for _ in range(n):
                raw = await scraper.scrape(target)
            runs.append((time.process_time() - t0) / n * 1000)
            if raw.status != "ok":
                raise SystemExit(f"scrape failed: {raw.status} {raw.error}")
            size = len(raw.body or "")
        return runs, size
    finally:
        await scraper.aclose()


async def run(args: argparse.Namespace) -> None:
    demo = start_demo(engines=["vllm"])
    try:
        config = demo.apply(Config(interval_s=1.0, discover=False))
        for name, transport, direct in (("lean", None, True), ("client", None, False),
                                        ("httpx", httpx.AsyncHTTPTransport(), True)):
            runs, size = await per_scrape_ms(config, transport, args.requests, args.repeat,
                                             direct=direct)
            each = ", ".join(f"{r:.3f}" for r in runs)
            print(f"{name:7s} {min(runs):6.3f} ms CPU per scrape (runs: {each}); "
                  f"body {size / 1000:.1f} KB")
    finally:
        demo.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    asyncio.run(run(ap.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
