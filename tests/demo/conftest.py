"""Helpers for the demo tests: an in-process DemoServer on 127.0.0.1, an SSE client and a
/metrics reader."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmtop.demo.server import DemoServer


@pytest.fixture
async def demo_factory() -> AsyncIterator:
    servers: list[DemoServer] = []

    async def make(engines=("vllm", "sglang", "triton"), **kw) -> DemoServer:
        kw.setdefault("background", False)
        s = DemoServer(list(engines), **kw)
        await s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        await s.stop()


async def metrics(s: aiohttp.ClientSession, base: str) -> dict[str, float]:
    """A demo engine's /metrics as {sample name: value summed over its series}, buckets left out."""
    async with s.get(base + "/metrics") as r:
        assert r.status == 200
        text = await r.text()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if "le" in smp.labels:
                continue
            out[smp.name] = out.get(smp.name, 0.0) + smp.value
    return out


async def stream_request(session: aiohttp.ClientSession, base: str, *, chat: bool = False,
                         prompt: str = "hello world", max_tokens: int = 16,
                         ignore_eos: bool = True, include_usage: bool = True) -> dict:
    """One streaming request; returns events, ttft, token count, usage, done flag."""
    body: dict = {"max_tokens": max_tokens, "stream": True, "ignore_eos": ignore_eos,
                  "stream_options": {"include_usage": include_usage}}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
        url = base + "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        url = base + "/v1/completions"
    t0 = time.perf_counter()
    ttft = None
    events: list = []
    done = False
    text = ""
    buf = b""
    async with session.post(url, json=body) as resp:
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        async for chunk in resp.content.iter_any():
            buf += chunk
            while b"\n\n" in buf:
                raw, buf = buf.split(b"\n\n", 1)
                line = raw.decode()
                assert line.startswith("data: ")
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    continue
                ev = json.loads(data)
                events.append(ev)
                if ev["choices"]:
                    c = ev["choices"][0]
                    piece = c["delta"].get("content") if chat else c["text"]
                    if piece:
                        if ttft is None:
                            ttft = time.perf_counter() - t0
                        text += piece
    return {"events": events, "ttft": ttft, "text": text, "done": done,
            "e2e": time.perf_counter() - t0}
