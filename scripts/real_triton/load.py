"""Closed-loop load on the real Triton's ``sleepy`` model: N clients, each sending the next
request when its last one answered, for at most S seconds (Ctrl-C/SIGINT stops it early).
Loopback only; used by tests/real_engine/test_real_queueing.py.

    python scripts/real_triton/load.py http://127.0.0.1:PORT --concurrency 64 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time

import httpx

BODY = {"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "INT32", "data": [1]}]}


async def main(url: str, concurrency: int, duration: float, model: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    end = time.monotonic() + duration

    async def client(c: httpx.AsyncClient) -> None:
        while not stop.is_set() and time.monotonic() < end:
            with contextlib.suppress(httpx.HTTPError):
                await c.post(f"{url}/v2/models/{model}/infer", json=BODY)

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as c:
        await asyncio.gather(*(client(c) for _ in range(concurrency)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--model", default="sleepy")
    a = ap.parse_args()
    asyncio.run(main(a.url.rstrip("/"), a.concurrency, a.duration, a.model))
