"""llama-server's ``/slots`` on the REAL llama-server: its in-flight requests, through the
monitor and the store (``sources/slots.py``, ``history/request_window.py``).

Skipped unless LLMTOP_REAL_LLAMACPP_URL points at it (``.ci/run`` starts it with 2 slots).
Two clients keep long requests running while the monitor ticks: both show as in flight,
with the prompt tokens the server counted, tokens decoded growing, an age, and no prompt
text anywhere.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from llmtop.config import Config
from llmtop.monitor import Monitor
from llmtop.targets import parse_target
from tests.real_engine.servers import need_env

pytestmark = pytest.mark.real_engine


def test_slots_show_the_requests_in_flight() -> None:
    url = need_env("LLMTOP_REAL_LLAMACPP_URL", "see scripts/real_llamacpp")
    target = parse_target(url)
    config = Config(targets=(target,), discover=False, interval_s=0.5)

    async def go() -> list[list[dict]]:
        mon = Monitor.from_config(config)
        seen: list[list[dict]] = []
        stop = asyncio.Event()

        async def client_loop(client: httpx.AsyncClient, i: int) -> None:
            # closed loop until the monitor has seen enough: on a quiet box one request of
            # the tiny model ends within a second or two, sooner than a few ticks
            while not stop.is_set():
                await client.post(f"{url}/v1/completions", json={
                    "model": "tiny-llama", "prompt": "secret prompt text " * (4 + i),
                    "max_tokens": 1500, "ignore_eos": True, "temperature": 0})

        async with httpx.AsyncClient(timeout=300) as client:
            reqs = [asyncio.ensure_future(client_loop(client, i)) for i in range(2)]
            try:
                for _ in range(60):
                    snap = await mon.tick()
                    seen.append(json.loads(json.dumps(
                        (snap.requests_window or {}).get("inflight", []))))
                    if sum(len(s) == 2 for s in seen) >= 3 and len(seen[-1]) == 2 and all(
                            r["output_tokens"] for r in seen[-1]):
                        break
                    await asyncio.sleep(0.5)
            finally:
                stop.set()
                await asyncio.gather(*reqs, return_exceptions=True)
                seen.append(json.loads(json.dumps(
                    ((await mon.tick()).requests_window or {}).get("inflight", []))))
                await mon.aclose()
        return seen

    seen = asyncio.run(go())
    busy = [s for s in seen if len(s) == 2]
    assert busy, seen
    last = busy[-1]
    assert {r["engine"] for r in last} == {"llamacpp"} and {r["slot"] for r in last} == {0, 1}
    assert all(r["prompt_tokens"] and r["prompt_tokens"] > 8 for r in last)
    first = {r["id"]: r for r in busy[0]}
    for r in last:
        assert r["age_s"] >= 0 and r["output_tokens"] >= (first.get(r["id"], {}).get(
            "output_tokens") or 0)
    assert "secret" not in json.dumps(seen)
    assert seen[-1] == []  # both finished: nothing in flight
