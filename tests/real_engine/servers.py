"""Where the real servers of ``scripts/real_*`` are, and how a test waits on them.

Each real server is named by an environment variable that ``.ci/run`` sets after starting it.
Without it a test skips with the reason; with ``LLMTOP_REQUIRE_REAL_ENGINES=1`` (set by CI)
it fails instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from urllib.parse import urlsplit

import pytest

__all__ = ["found_without_a_target", "llmtop", "need_env", "once_while_sampling"]

REQUIRE = os.environ.get("LLMTOP_REQUIRE_REAL_ENGINES") == "1"


def need_env(name: str, hint: str) -> str:
    """The value of ``name``; skip (or fail under ``LLMTOP_REQUIRE_REAL_ENGINES=1``) if unset."""
    value = os.environ.get(name, "")
    if not value:
        msg = f"set {name} ({hint})"
        if REQUIRE:
            pytest.fail(f"LLMTOP_REQUIRE_REAL_ENGINES=1 but {msg}")
        pytest.skip(msg)
    return value


def llmtop(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the ``llmtop`` CLI of this checkout."""
    return subprocess.run(
        [sys.executable, "-m", "llmtop", *args], capture_output=True, text=True, timeout=timeout
    )


def found_without_a_target(url: str, engine: str) -> None:
    """``llmtop`` with no TARGET, as an operator runs it: discovery finds the real server at
    ``url`` by its process (its port is not a default one), and the TUI's monitor (which
    searches, ``Monitor.from_config(..., rediscover=True)``) shows it ``ok``."""
    from llmtop.config import Config
    from llmtop.discovery.search import discover
    from llmtop.monitor import Monitor

    port = urlsplit(url).port

    async def go() -> None:
        found = await discover(Config(), ports=(), timeout_s=5.0)  # processes only
        assert [t.engine for t in found if t.port == port] == [engine], found
        mon = Monitor.from_config(Config(), rediscover=True)
        try:
            for _ in range(20):
                snap = await mon.tick()
                rows = [r for r in snap.engines if r.target.endswith(f":{port}")]
                if rows and rows[0].state == "ok":
                    break
                await asyncio.sleep(1.0)
            assert rows and rows[0].state == "ok" and rows[0].engine == engine, rows
        finally:
            await mon.aclose()

    asyncio.run(go())


async def once_while_sampling(url: str, sample, window: str = "1") -> dict:
    """``llmtop --once --json --window WINDOW URL``, awaiting ``sample()`` (the test's own
    read of the server) every 50 ms while it runs and once after; returns the snapshot."""
    import json

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llmtop", "--once", "--json", "--window", window, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    done = asyncio.create_task(proc.communicate())
    while not done.done():
        await sample()
        await asyncio.sleep(0.05)
    out, err = await done
    await sample()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)
