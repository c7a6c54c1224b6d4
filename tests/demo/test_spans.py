"""The demo vLLM's request spans (demo/formats_spans.py, demo/span_sender.py): the real
vLLM's bytes, the simulated request's numbers, delivered to llmtop's receiver and matched to
the engine's row; a receiver that is down costs spans (counted), never the serving."""

from __future__ import annotations

import asyncio
import random
import socket

import aiohttp

from llmtop.config import Config, Target
from llmtop.demo.formats_spans import (
    SCOPE_VLLM,
    DemoSpan,
    encode_export,
    parse_traceparent,
    vllm_resource,
    vllm_span,
)
from llmtop.demo.server import DemoServer
from llmtop.demo.sim import Request
from llmtop.demo.span_sender import SpanSender
from llmtop.history.store import Store
from llmtop.parse.spans import parse_spans
from llmtop.sources.otlp import OtlpReceiver
from llmtop.sources.otlp_decode import decode_protobuf
from tests.spans.spanfix import bodies

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def _as_demo(body: bytes) -> bytes:
    """A real body decoded by llmtop, then written again by the demo's encoder."""
    spans = decode_protobuf(body)
    groups = [DemoSpan(s.name, bytes.fromhex(s.trace_id), bytes.fromhex(s.span_id),
                       bytes.fromhex(s.parent_id), s.start_ns, s.end_ns,
                       tuple(s.attrs.items()), **({"flags": 0x300} if s.parent_id else {}))
              for s in spans]
    return encode_export([(tuple(spans[0].resource.items()), spans[0].scope, groups)])


def test_the_encoder_writes_the_real_vllm_bytes():
    for name in ("requests", "burst"):
        for body in bodies(name):
            assert _as_demo(body) == body


def _finished(prompt: int = 617, out: int = 33, max_tokens: int = 71) -> Request:
    r = Request(7, prompt, [], max_tokens, out, stream=True, ignore_eos=False,
                background=True, arrival=1_796_186_931.25)
    r.admitted_t = r.arrival + 0.123
    r.first_token_t = r.admitted_t + 0.035
    r.last_token_t = r.finish_t = r.first_token_t + 0.436
    r.output = out
    r.finish_reason = "stop"
    return r


def test_the_span_of_a_simulated_request_carries_its_numbers():
    r = _finished()
    span = vllm_span(r, random.Random(0))
    real = decode_protobuf(bodies("requests")[0])[0]
    body = encode_export([(vllm_resource("vllm@127.0.0.1:8000", 42, "i"), SCOPE_VLLM, [span])])
    got = decode_protobuf(body)[0]
    assert got.name == "llm_request" and got.scope == real.scope
    assert list(got.attrs) == list(real.attrs)  # the same keys, in the same order
    assert {k: type(v) for k, v in got.attrs.items()} == \
        {k: type(v) for k, v in real.attrs.items()}
    assert set(got.resource) == set(real.resource)
    rec = parse_spans(decode_protobuf(body)).requests[0]
    assert (rec.prompt_tokens, rec.output_tokens) == (617, 33)
    assert rec.queue_s == r.admitted_t - r.arrival
    assert rec.prefill_s == r.first_token_t - r.admitted_t
    assert rec.ttft_s == r.first_token_t - r.arrival
    assert rec.decode_s == r.finish_t - r.first_token_t
    assert rec.e2e_s == r.finish_t - r.arrival
    assert rec.service == "vllm@127.0.0.1:8000" and rec.source == "traffic"
    assert rec.id.startswith("cmpl-") and rec.id.endswith("-0")
    assert rec.finish_reason is None  # the real vLLM's span has none
    assert got.start_ns == int(r.arrival * 1e9) and got.end_ns == int(r.finish_t * 1e9)
    unfinished = _finished()
    unfinished.first_token_t = None
    assert vllm_span(unfinished, random.Random(0)) is None


def test_traceparent():
    assert parse_traceparent(f"00-{TRACE}-{PARENT}-01") == (bytes.fromhex(TRACE),
                                                            bytes.fromhex(PARENT))
    for bad in (None, "", "00-xyz-abc-01", f"00-{'0' * 32}-{PARENT}-01", "garbage"):
        assert parse_traceparent(bad) is None


async def _serve(endpoint: str) -> DemoServer:
    s = DemoServer(["vllm", "sglang", "vllm"], background=False, otlp_endpoint=endpoint)
    assert s.spans is not None
    s.spans.interval_s = 3600.0  # the test flushes by itself
    await s.start()
    return s


async def _complete(base: str, prompt_words: int, max_tokens: int,
                    headers: dict[str, str] | None = None) -> dict:
    body = {"prompt": " ".join(["hello"] * prompt_words), "max_tokens": max_tokens,
            "ignore_eos": True}
    async with aiohttp.ClientSession() as s, \
            s.post(base + "/v1/completions", json=body, headers=headers or {}) as resp:
        assert resp.status == 200
        return await resp.json()


async def test_a_demo_server_delivers_spans_to_the_receiver_on_the_right_row():
    rx = OtlpReceiver("127.0.0.1", 0)
    server = await _serve(rx.url)
    try:
        vllm, sglang, other = server.sites  # two vLLMs on one host: service.name decides
        seen: list[Request] = []
        hook = vllm.engine.on_finish
        assert hook is not None and sglang.engine.on_finish is None

        def spy(r: Request) -> None:
            seen.append(r)
            hook(r)

        vllm.engine.on_finish = spy
        a = await _complete(vllm.base_url, 50, 16,
                            {"traceparent": f"00-{TRACE}-{PARENT}-01"})
        b = await _complete(vllm.base_url, 20, 8)
        c = await _complete(other.base_url, 30, 5)
        await _complete(sglang.base_url, 20, 8)  # no span: llmtop's SGLang shape is unseen
        assert await asyncio.to_thread(server.spans.flush) == 3
    finally:
        await server.stop()
    raws = rx.drain()
    rx.close()
    cfg = Config(targets=tuple(Target(name=s.target, base_url=s.base_url, engine=s.kind,
                                      host="127.0.0.1", port=s.port) for s in server.sites))
    store = Store(cfg)
    for raw in raws:
        store.ingest_spans(raw)
    reqs = {r.id: r for r in store.requests.window(1e10, 4e9)}
    assert set(reqs) == {a["id"] + "-0", b["id"] + "-0", c["id"] + "-0"}
    assert reqs[c["id"] + "-0"].target == other.target
    ra, rb = reqs[a["id"] + "-0"], reqs[b["id"] + "-0"]
    assert (ra.prompt_tokens, ra.output_tokens) == (a["usage"]["prompt_tokens"], 16) == (50, 16)
    assert (rb.prompt_tokens, rb.output_tokens) == (20, 8)
    assert {ra.target, rb.target} == {vllm.target}
    assert ra.trace_id == TRACE and rb.trace_id != TRACE
    sim = {r.req_id: r for r in seen}[a["id"]]  # the times are the simulation's own
    assert abs(ra.ttft_s - (sim.first_token_t - sim.arrival)) < 1e-6
    assert abs(ra.e2e_s - (sim.finish_t - sim.arrival)) < 1e-6
    assert server.spans.stats()["sent"] == 3 and server.spans.dropped == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_receiver_down_the_demo_keeps_serving_and_counts_the_dropped(capsys):
    server = await _serve(f"http://127.0.0.1:{_closed_port()}/v1/traces")
    try:
        base = server.sites[0].base_url
        first = await _complete(base, 10, 4)
        assert await asyncio.to_thread(server.spans.flush) == 0
        second = await _complete(base, 10, 4)  # still serving
        assert await asyncio.to_thread(server.spans.flush) == 0
        assert first["usage"]["completion_tokens"] == second["usage"]["completion_tokens"] == 4
        st = server.spans.stats()
        assert (st["dropped"], st["sent"], st["posts_failed"]) == (2, 0, 2)
        assert st["last_error"]
    finally:
        await server.stop()
    err = capsys.readouterr().err
    assert err.count("dropped") == 1 and "Traceback" not in err  # said once


def test_a_refusing_receiver_and_a_full_queue_are_counted():
    rx = OtlpReceiver("127.0.0.1", 0, allows=lambda _h: False)  # 401 to everyone
    try:
        sender = SpanSender(rx.url, max_queue=3)
        span = vllm_span(_finished(), random.Random(1))
        for _ in range(5):
            sender.add(vllm_resource("x", 1, "i"), SCOPE_VLLM, span)
        assert sender.dropped == 2  # the queue holds 3
        assert sender.flush() == 0 and sender.dropped == 5
        assert "401" in (sender.last_error or "")
    finally:
        rx.close()
    posted: list[bytes] = []
    ok = SpanSender("http://127.0.0.1:1/v1/traces", post=lambda _u, b, _t: posted.append(b))
    ok.add(vllm_resource("x", 1, "i"), SCOPE_VLLM, span)
    ok.add(vllm_resource("x", 1, "i"), SCOPE_VLLM, None)  # a request with no span
    assert ok.flush() == 1 and ok.flush() == 0 and len(posted) == 1
    assert len(decode_protobuf(posted[0])) == 1
