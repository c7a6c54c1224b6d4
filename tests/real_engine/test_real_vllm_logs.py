"""The real vLLM's log, found with no target: started by ``scripts/real_vllm/serve.sh`` with
its output to a file, found by its process, its log found through ``/proc/<pid>/fd/1`` and
followed by the monitor as the TUI runs it (``Monitor.from_config(..., rediscover=True)``):
a request's access line reaches the sink as part of a ``RawLog`` of that engine.

Needs LLMTOP_REAL_VLLM_URL and LLMTOP_REAL_VLLM_LOG (the server's output file), set by
``.ci/run``.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from urllib.parse import urlsplit

import httpx
import pytest

from llmtop.config import Config
from llmtop.discovery.logs import find_logs
from llmtop.discovery.search import discover
from llmtop.model import RawLog
from llmtop.monitor import Monitor
from tests.real_engine.servers import need_env

pytestmark = pytest.mark.real_engine


def test_the_real_vllms_log_is_found_from_its_pid_and_followed() -> None:
    url = need_env("LLMTOP_REAL_VLLM_URL", "start scripts/real_vllm/serve.sh")
    log = os.path.realpath(need_env("LLMTOP_REAL_VLLM_LOG", "serve.sh's STATE/server.log"))
    port = urlsplit(url).port

    async def go() -> list[RawLog]:
        found = [t for t in await discover(Config(), ports=(), timeout_s=5.0)
                 if t.port == port]
        assert [t.engine for t in found] == ["vllm"] and found[0].pid is not None, found
        ((_, where),) = find_logs(found)
        assert where is not None and (where.kind, where.path, where.fmt) == (
            "file", log, "vllm"), where
        seen: list[RawLog] = []
        def sink(item: object) -> None:
            if isinstance(item, RawLog):
                seen.append(item)

        mon = Monitor.from_config(Config(), rediscover=True, sink=sink)
        mark = uuid.uuid4().hex[:8]
        try:
            for _ in range(60):
                await mon.tick()
                if any(r.target.endswith(f":{port}") for r in seen):
                    break
                await asyncio.sleep(0.5)
            async with httpx.AsyncClient(timeout=120) as client:  # an access line to follow
                r = await client.post(f"{url}/v1/completions", json={
                    "model": "tiny-llama", "prompt": f"log test {mark}", "max_tokens": 2})
                assert r.status_code == 200, r.text
            for _ in range(60):
                await mon.tick()
                if any('"POST /v1/completions HTTP/1.1" 200' in " ".join(e.lines)
                       for r in seen for e in r.events if r.target.endswith(f":{port}")):
                    break
                await asyncio.sleep(0.5)
        finally:
            await mon.aclose()
        return [r for r in seen if r.target.endswith(f":{port}")]

    raws = asyncio.run(go())
    assert raws and all(r.location.path == log and r.error is None for r in raws), raws
    lines = [" ".join(e.lines) for r in raws for e in r.events]
    assert any('"POST /v1/completions HTTP/1.1" 200' in t for t in lines), lines[-20:]
