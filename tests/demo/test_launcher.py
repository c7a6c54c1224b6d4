"""start_demo(): separate process, reachable targets, GPU JSON, stop() kills the child."""

from __future__ import annotations

import os
import time

import httpx
import pytest

from llmtop.config import Config
from llmtop.demo.launcher import start_demo


def test_start_demo_targets_and_stop():
    t0 = time.monotonic()
    demo = start_demo()
    started = time.monotonic() - t0
    try:
        assert demo.pid != os.getpid()
        assert [t.engine for t in demo.targets] == ["vllm", "sglang", "triton"]
        for t in demo.targets:
            assert t.name == f"{t.engine}@127.0.0.1:{t.port}"
            assert t.base_url == f"http://127.0.0.1:{t.port}"
            r = httpx.get(t.base_url + "/metrics", timeout=5)
            assert r.status_code == 200 and r.text
            assert demo.api_urls[t.name] == t.base_url
        gpus = httpx.get(demo.gpu_url, timeout=5).json()["gpus"]
        assert len(gpus) == 3
        assert {g["source"] for g in gpus} == {"demo"}
        assert [g["processes"][0]["engine_target"] for g in gpus] == [t.name for t in demo.targets]
        assert gpus[0]["processes"][0]["pid"] == demo.pid
        first2 = httpx.get(demo.gpu_url + "?limit=2", timeout=5).json()["gpus"]
        assert [g["index"] for g in first2] == [g["index"] for g in gpus[:2]]
        assert httpx.get(demo.gpu_url + "?limit=x", timeout=5).status_code == 400
        cfg = demo.apply(Config())
        assert cfg.discover is False and list(cfg.targets) == demo.targets
    finally:
        demo.stop()
    print(f"start_demo took {started:.2f}s")
    assert demo.proc.poll() is not None
    with pytest.raises(httpx.ConnectError):
        httpx.get(demo.targets[0].base_url + "/metrics", timeout=2)
    demo.stop()  # idempotent


def test_start_demo_scenario_and_engines():
    demo = start_demo(scenario="garbage", engines=["vllm"])
    try:
        assert len(demo.targets) == 1
        r = httpx.get(demo.targets[0].base_url + "/metrics", timeout=5)
        assert r.status_code == 200 and "garbage" in r.text
    finally:
        demo.stop()
