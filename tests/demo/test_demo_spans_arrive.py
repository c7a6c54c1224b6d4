"""``llmtop --demo``'s request spans reach a receiver: a real ``demo serve`` child started
with the endpoint the TUI gives it, one request to its vLLM, and the receiver gets that
engine's ``llm_request`` span (the wiring's other half is ``test_spans_wiring.py``)."""

from __future__ import annotations

import time

import httpx

from llmtop.demo import launcher
from llmtop.parse.spans import parse_spans
from llmtop.sources.otlp import OtlpReceiver


def test_a_demo_vllm_sends_its_request_spans_to_the_endpoint_it_is_given():
    rx = OtlpReceiver("127.0.0.1", 0)
    demo = None
    try:
        demo = launcher.start_demo(engines=["vllm"], extra_args=["--no-background"],
                                   otlp_endpoint=rx.url)
        (target, base), = demo.api_urls.items()
        model = httpx.get(f"{base}/v1/models", timeout=10).json()["data"][0]["id"]
        r = httpx.post(f"{base}/v1/completions", timeout=10,
                       json={"model": model, "prompt": "hello", "max_tokens": 4})
        assert r.status_code == 200, r.text
        got = []
        deadline = time.monotonic() + 15  # the demo sends once a second: a bound, not a wait
        while not got and time.monotonic() < deadline:
            for body in rx.drain():
                got += parse_spans(body.spans or []).requests
            time.sleep(0.05)
        assert got, f"no span came from the demo ({rx.stats()})"
        assert {(r.engine, r.service) for r in got} == {("vllm", target)}
        assert all(r.output_tokens == 4 and r.ttft_s is not None for r in got)
    finally:
        if demo is not None:
            demo.stop()
        rx.close()
