"""``stuck`` on a REAL vLLM (CPU build, tiny local model): its engine core paused with
requests in flight. The API server still answers ``/metrics`` (the gauges frozen at the last
step: requests running, the token counter still) and ``/health`` 200 — the engine core is not
dead, only making nothing: vLLM issue #53130's symptom, as a health check sees it.

While it generates, ``--once`` names nothing and asks ``/health`` nothing (the server's own
access log counts the requests); paused, ``--once --window 20`` names ``stuck`` with
"/health answers 200", having asked ``/health`` once.

Opt-in like the incidents (it starts its own vLLM, ~1.5 min): ``LLMTOP_REAL_VLLM_INCIDENTS=1``
after ``scripts/real_vllm/setup.sh``; set without the cached vLLM, it fails rather than skips.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from llmtop.config import Config
from llmtop.once import _run
from llmtop.targets import parse_target
from tests.real_engine.incidents import serve, vllm_ready

ENABLED = os.environ.get("LLMTOP_REAL_VLLM_INCIDENTS") == "1"
pytestmark = [
    pytest.mark.real_engine,
    pytest.mark.slow,
    pytest.mark.skipif(not ENABLED, reason=(
        "set LLMTOP_REAL_VLLM_INCIDENTS=1 after scripts/real_vllm/setup.sh: it starts its own "
        "real vLLM (CPU build, ~3 GB RAM, ~1.5 min)")),
]
REQUESTS = 16


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` named ``VLLM::…`` (its engine core and worker)."""
    kids: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
        names[int(d.name)] = name
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            todo.append(k)
            if names.get(k, "").startswith("VLLM::"):
                out.append(k)
    return out


def _health_gets(state: Path) -> int:
    return (state / "server.log").read_text(errors="replace").count("GET /health ")


def _gauge(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


async def _once(url: str, window_s: float) -> dict:
    t = parse_target("vllm@" + url.split("//", 1)[1], timeout_s=5.0)
    out, err = io.StringIO(), io.StringIO()
    rc = await _run(Config(targets=(t,), discover=False), window_s=window_s, as_json=True,
                    demo=None, monitor=None, out=out, err=err)
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


def _stuck(doc: dict) -> list[dict]:
    return [f for f in doc["diagnosis"] if f["rule"] == "stuck"]


async def test_paused_engine_core_is_stuck_while_health_answers_200(tmp_path):
    if not vllm_ready():
        pytest.fail("LLMTOP_REAL_VLLM_INCIDENTS=1 but no cached vLLM: run "
                    "scripts/real_vllm/setup.sh")
    state = tmp_path / "vllm"
    with serve(state) as url:
        pid = int((state / "pid").read_text())
        body = {"model": "tiny-llama", "max_tokens": 1000, "ignore_eos": True}
        async with httpx.AsyncClient(timeout=300) as client:
            load = [asyncio.ensure_future(client.post(
                f"{url}/v1/completions", json={**body, "prompt": f"Story number {i}:"}))
                for i in range(REQUESTS)]
            paused: list[int] = []
            try:
                deadline = time.monotonic() + 60
                while _gauge(url, "vllm:num_requests_running") < 1:
                    assert time.monotonic() < deadline, "no request ever ran"
                    await asyncio.sleep(0.1)
                asked = _health_gets(state)
                busy = await _once(url, 2.0)  # generating: nothing to name, nothing asked
                assert not _stuck(busy), busy["diagnosis"]
                assert [e["health_status"] for e in busy["engines"]] == [None]
                assert _health_gets(state) == asked
                paused = _children(pid)
                assert paused, "no VLLM:: engine core under the server"
                for p in paused:
                    os.kill(p, signal.SIGSTOP)
                await asyncio.sleep(1.0)
                held = _gauge(url, "vllm:num_requests_running")
                assert held >= 1, "the requests finished before the engine core was paused"
                asked = _health_gets(state)
                doc = await _once(url, 20.0)
                print(json.dumps({"engines": doc["engines"][0] | {"ttft_s": None},
                                  "stuck": _stuck(doc)})[:1500])
                [f] = _stuck(doc)
                assert f["severity"] == "critical"
                assert f"holds {held:.0f} running" in f["summary"]
                assert "/health answers 200: the scheduler admits nothing" in f["summary"]
                assert [e["health_status"] for e in doc["engines"]] == [200]
                assert _health_gets(state) - asked == 1  # one poll: after the last tick
            finally:
                for p in paused:
                    os.kill(p, signal.SIGCONT)
                for task in load:
                    task.cancel()
                await asyncio.gather(*load, return_exceptions=True)
