"""Streaming load and two monitor ticks over it, for the real engines' FLOP/byte tests.

- ``stream_one``: one streamed completion, its ``usage`` (prompt and completion tokens).
- ``live_window``: two ticks of the real monitor ``gap_s`` apart under ``clients`` streaming
  clients: the two metrics scrapes and the engine's row over exactly their span.
- ``assert_rates_match``: the row's achieved rates against the counters' own.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from llmtop.config import Config
from llmtop.model import EngineRow, RawScrape
from llmtop.monitor import Monitor
from llmtop.targets import parse_target

__all__ = ["assert_rates_match", "live_window", "stream_one"]


async def stream_one(client: httpx.AsyncClient, url: str, model: str, max_tokens: int,
                     prompt: str = "def main():") -> dict[str, Any]:
    """One streamed completion of exactly ``max_tokens`` tokens; its ``usage``."""
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    usage: dict[str, Any] = {}
    async with client.stream("POST", f"{url}/v1/completions", json=body) as resp:
        resp.raise_for_status()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                usage = json.loads(line[6:]).get("usage") or usage
    return usage


def live_window(url: str, model: str, gap_s: float, clients: int = 0
                ) -> tuple[RawScrape, RawScrape, EngineRow]:
    """Two ticks of the real monitor ``gap_s`` apart (under ``clients`` streaming clients):
    the two scrapes and the row over exactly their span."""
    bodies: list[RawScrape] = []

    def sink(item: Any) -> None:
        if isinstance(item, RawScrape) and item.kind == "metrics" and item.status == "ok":
            bodies.append(item)

    config = Config(targets=(parse_target(url),), discover=False)

    async def go() -> tuple[RawScrape, RawScrape, EngineRow]:
        mon = Monitor.from_config(config, sink=sink)
        stop = asyncio.Event()

        async def stream(client: httpx.AsyncClient) -> None:
            while not stop.is_set():  # one request after another, until the scrapes end
                await stream_one(client, url, model, 128)

        try:
            async with httpx.AsyncClient(timeout=120) as client:
                load = asyncio.gather(*(stream(client) for _ in range(clients)))
                await asyncio.sleep(1.5 if clients else 0.0)  # the clients are decoding
                await mon.tick()
                await asyncio.sleep(gap_s)
                await mon.tick()
                stop.set()
                await load
            a, b = bodies[0], bodies[-1]
            (row,) = mon.store.snapshot(b.t_mono - a.t_mono, b.t_mono).engines
            return a, b, row
        finally:
            await mon.aclose()

    return asyncio.run(go())


def assert_rates_match(engine: str, row: EngineRow, ca: dict[str, float],
                       cb: dict[str, float], dt: float) -> dict[str, float]:
    """The row's achieved rates equal the counters' own rate between two scrapes ``dt`` apart
    (``ca``/``cb``: ``est_*`` and ``generation_tokens``), within 2 %; prints both; the hand
    rates back."""
    hand = {k: (cb[k] - ca[k]) / dt for k in ("est_flops", "est_read_bytes", "est_write_bytes")}
    print(f"\nreal {engine} under 3 streams over {dt:.2f} s: read "
          f"{hand['est_read_bytes'] / 1e6:.0f} MB/s, written "
          f"{hand['est_write_bytes'] / 1e6:.1f} MB/s, {hand['est_flops'] / 1e9:.2f} GFLOP/s, "
          f"{(cb['generation_tokens'] - ca['generation_tokens']) / dt:.0f} tokens/s; llmtop: "
          f"{row.achieved_read_bytes_per_s / 1e6:.0f} MB/s, "
          f"{row.achieved_flops_per_s / 1e9:.2f} GFLOP/s")
    assert row.achieved_read_bytes_per_s == pytest.approx(hand["est_read_bytes"], rel=0.02)
    assert row.achieved_write_bytes_per_s == pytest.approx(hand["est_write_bytes"], rel=0.02)
    assert row.achieved_flops_per_s == pytest.approx(hand["est_flops"], rel=0.02)
    assert row.achieved_bytes_per_s == pytest.approx(
        hand["est_read_bytes"] + hand["est_write_bytes"], rel=0.02)
    assert row.mfu_hint is None and row.mbu is None  # no GPU here, no --gpu-peak
    return hand
