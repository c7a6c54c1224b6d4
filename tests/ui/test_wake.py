"""The poller's sleep between ticks (``Wake``): a timeout, or ``set()`` at once."""

from __future__ import annotations

import asyncio
import time

from llmtop.ui.app import Wake


async def test_sleep_ends_at_the_timeout_or_at_set():
    w = Wake()
    t0 = time.monotonic()
    await w.sleep(0.05)
    assert 0.04 <= time.monotonic() - t0 < 1.0
    asyncio.get_running_loop().call_later(0.02, w.set)
    t0 = time.monotonic()
    await w.sleep(5.0)
    assert time.monotonic() - t0 < 1.0 and w.is_set()
    await asyncio.wait_for(w.sleep(5.0), 1.0)  # still set: no sleep at all
    w.clear()
    assert not w.is_set()
    try:
        await asyncio.wait_for(w.sleep(5.0), 0.05)
        raise AssertionError("a cleared Wake must sleep")
    except asyncio.TimeoutError:
        pass
    asyncio.get_running_loop().call_later(0.01, w.set)  # a cancelled sleep left no waiter
    await asyncio.wait_for(w.sleep(5.0), 1.0)
