"""CPU cost of the demo engines' own process: idle (background traffic only) and while
streaming N concurrent requests to the demo vLLM with an aiohttp client.

    .venv/bin/python benchmarks/demo_cost.py [--streams 256] [--seconds 10]

CPU is read from /proc/<pid>/stat (utime + stime) of the demo process, so the client's own
CPU is not counted. Prints one line per phase: cores used (1.0 = one full core).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from llmtop.demo.launcher import start_demo

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def stream_load(base: str, streams: int, seconds: float) -> int:
    tokens = 0
    t_end = time.monotonic() + seconds

    async def worker(s: aiohttp.ClientSession) -> None:
        nonlocal tokens
        while time.monotonic() < t_end:
            async with s.post(base + "/v1/completions", json={
                "prompt": "word " * 200, "max_tokens": 256, "ignore_eos": True, "stream": True,
            }) as r:
                async for chunk in r.content.iter_any():
                    tokens += chunk.count(b'"text":"')
                    if time.monotonic() >= t_end:
                        return

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        await asyncio.gather(*(worker(s) for _ in range(streams)))
    return tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    demo = start_demo()
    try:
        time.sleep(2.0)  # warm up
        c0, t0 = cpu_s(demo.pid), time.monotonic()
        time.sleep(args.seconds)
        idle = (cpu_s(demo.pid) - c0) / (time.monotonic() - t0)
        print(f"idle (3 engines, background traffic only): {idle:.3f} cores "
              f"({idle * 100:.1f}% of one core) over {args.seconds:.0f} s")
        base = demo.targets[0].base_url
        c0, t0 = cpu_s(demo.pid), time.monotonic()
        tokens = asyncio.run(stream_load(base, args.streams, args.seconds))
        dt = time.monotonic() - t0
        busy = (cpu_s(demo.pid) - c0) / dt
        print(f"{args.streams} concurrent streams to demo vLLM: {busy:.3f} cores "
              f"({busy * 100:.1f}% of one core), {tokens / dt:.0f} streamed tok/s, "
              f"{(busy * dt) / max(1, tokens) * 1e6:.1f} us demo CPU per streamed token")
    finally:
        demo.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
