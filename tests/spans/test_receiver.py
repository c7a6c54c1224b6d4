"""sources/otlp.py: the OTLP/HTTP receiver on real vLLM bodies, and hostile input."""

from __future__ import annotations

import gzip
import json
import socket

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmtop.sources.otlp import OtlpReceiver
from llmtop.sources.otlp_decode import SpanDecodeError, decode
from tests.conftest import examples
from tests.spans.spanfix import bodies

PB = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def rx():
    r = OtlpReceiver("127.0.0.1", 0, max_body=256 * 1024, max_pending_spans=20)
    yield r
    r.close()


_CLIENT = httpx.Client(timeout=5)


def _post(rx: OtlpReceiver, body: bytes, headers: dict | None = None) -> httpx.Response:
    return _CLIENT.post(rx.url, content=body, headers=headers or PB)


def test_real_bodies_are_queued_and_answered_empty(rx):
    for b in bodies("requests") + bodies("burst"):
        r = _post(rx, b)
        assert r.status_code == 200 and r.content == b""  # an empty ExportTraceServiceResponse
        assert r.headers["content-type"] == "application/x-protobuf"
    got = rx.drain()
    assert [len(x.spans) for x in got] == [3, 4, 2] or sum(len(x.spans) for x in got) == 9
    assert all(x.peer == "127.0.0.1" and x.transport == "http" for x in got)
    assert rx.drain() == []  # taken once
    st_ = rx.stats()
    assert (st_["bodies"], st_["spans"], st_["bad"]) == (len(got), 9, 0)
    assert st_["url"].endswith("/v1/traces")


def test_gzip_and_json_bodies(rx):
    [b] = bodies("requests")
    r = _post(rx, gzip.compress(b), {**PB, "Content-Encoding": "gzip"})
    assert r.status_code == 200
    # OTLP/JSON (SYNTHETIC values; field names from the OTLP spec): hex ids, int64 as strings
    doc = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "vllm"}}]},
        "scopeSpans": [{"scope": {"name": "vllm.tracing.otel"}, "spans": [{
            "traceId": "6c6c6d746f70aabbccddeeff00112233", "spanId": "00f067aa0ba902b7",
            "name": "llm_request", "startTimeUnixNano": "1796000000000000000",
            "endTimeUnixNano": "1796000001000000000", "attributes": [
                {"key": "gen_ai.request.id", "value": {"stringValue": "cmpl-1-0"}},
                {"key": "gen_ai.usage.prompt_tokens", "value": {"intValue": "12"}},
                {"key": "gen_ai.latency.time_to_first_token",
                 "value": {"doubleValue": 0.25}}]}]}]}]}
    r = _post(rx, json.dumps(doc).encode(), {"Content-Type": "application/json"})
    assert r.status_code == 200 and r.json() == {}
    a, j = rx.drain()
    assert len(a.spans) == 3 and a.body == b  # kept gunzipped, as the engine meant it
    [s] = j.spans
    assert j.kind == "json" and s.trace_id.startswith("6c6c6d") and s.attrs[
        "gen_ai.usage.prompt_tokens"] == 12 and s.resource["service.name"] == "vllm"


@pytest.mark.parametrize(("body", "headers", "code", "counter"), [
    (b"\xff\xfe garbage \x00\x01", PB, 400, "bad"),
    (bodies("requests")[0][:-7], PB, 400, "bad"),  # truncated protobuf
    (b"{not json", {"Content-Type": "application/json"}, 400, "bad"),
    (b'{"resourceSpans": 7}', {"Content-Type": "application/json"}, 400, "bad"),
    (b"x", {"Content-Type": "text/html"}, 415, "wrong_type"),
    (b"x", {**PB, "Content-Encoding": "br"}, 415, "wrong_type"),
    (b"not gzip at all", {**PB, "Content-Encoding": "gzip"}, 400, "bad"),
    (gzip.compress(b"\x00" * (300 * 1024)), {**PB, "Content-Encoding": "gzip"}, 413,
     "too_large"),  # a small gzip that unpacks past the limit
    (b"\x00" * (300 * 1024), PB, 413, "too_large"),
], ids=["garbage", "truncated", "bad-json", "json-not-otlp", "html", "brotli", "bad-gzip",
        "gzip-bomb", "huge"])
def test_hostile_bodies_get_an_http_error_and_a_count(rx, body, headers, code, counter):
    r = _post(rx, body, headers)
    assert r.status_code == code
    st_ = rx.stats()
    assert st_[counter] == 1 and st_["bodies"] == 0 and st_["last_error"]
    assert rx.drain() == []
    # and the receiver still works after it
    assert _post(rx, bodies("requests")[0]).status_code == 200


def test_wrong_method_path_and_length(rx):
    assert httpx.get(rx.url, timeout=5).status_code == 405
    assert httpx.post(rx.url.replace("/v1/traces", "/v1/metrics"), content=b"x",
                      headers=PB, timeout=5).status_code == 404
    with socket.create_connection((rx.host, rx.port), timeout=5) as s:  # no Content-Length
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/x-protobuf\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 411")


def test_a_body_cut_short_is_counted_not_raised(rx):
    with socket.create_connection((rx.host, rx.port), timeout=5) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/x-protobuf\r\nContent-Length: 5000\r\n\r\nabc")
        s.shutdown(socket.SHUT_WR)
        s.recv(100)
    for _ in range(50):
        if rx.stats()["truncated"]:
            break
        import time

        time.sleep(0.02)
    assert rx.stats()["truncated"] == 1 and rx.drain() == []


def test_a_flood_is_dropped_and_counted(rx):
    b = bodies("requests")[0]  # 3 spans; the queue holds 20
    codes = [_post(rx, b).status_code for _ in range(10)]
    assert codes[:7] == [200] * 7 and set(codes[7:]) == {429}
    st_ = rx.stats()
    assert st_["dropped_bodies"] == 3 and st_["pending_spans"] == 21
    assert "flood" in st_["last_error"]
    assert len(rx.drain()) == 7
    assert _post(rx, b).status_code == 200  # drained: room again


def test_a_token_is_required_when_asked(tmp_path):
    from llmtop.httpserve import TokenFile

    tok = tmp_path / "tok"
    tok.write_text("s3cret\n")
    r = OtlpReceiver("127.0.0.1", 0, allows=TokenFile(str(tok)).allows)
    try:
        b = bodies("requests")[0]
        assert _post(r, b).status_code == 401
        assert _post(r, b, {**PB, "Authorization": "Bearer nope"}).status_code == 401
        assert _post(r, b, {**PB, "Authorization": "Bearer s3cret"}).status_code == 200
        assert r.stats()["unauthorized"] == 2 and len(r.drain()) == 1
    finally:
        r.close()


@settings(max_examples=examples(100), deadline=None)
@given(st.binary(max_size=300))
def test_decode_never_raises_anything_but_its_own_error(data):
    for kind in ("protobuf", "json"):
        try:
            decode(data, kind)
        except SpanDecodeError:
            pass


@settings(max_examples=examples(50), deadline=None)
@given(st.integers(min_value=0, max_value=2000), st.binary(min_size=1, max_size=8))
def test_a_corrupted_real_body_never_raises_anything_else(pos, junk):
    b = bytearray(bodies("burst")[0])
    pos %= len(b)
    b[pos:pos + len(junk)] = junk
    try:
        decode(bytes(b), "protobuf")
    except SpanDecodeError:
        pass


def test_a_flood_over_the_span_rate_is_rejected_unconverted():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    now = [100.0]
    r = OtlpReceiver("127.0.0.1", 0, max_spans_per_s=5, mono=lambda: now[0])
    try:
        b = bodies("requests")[0]  # 3 spans; the bucket holds 5 a second
        assert _post(r, b).content == b""
        over = _post(r, b)  # 2 left: rejected, answered so that the sender does not retry
        assert over.status_code == 200
        resp = ExportTraceServiceResponse()
        resp.ParseFromString(over.content)
        assert resp.partial_success.rejected_spans == 3
        st_ = r.stats()
        assert (st_["bodies"], st_["dropped_spans"], st_["dropped_bodies"]) == (1, 3, 1)
        assert "spans/s" in st_["last_error"]
        now[0] += 1.0  # refilled
        assert _post(r, b).content == b""
        assert len(r.drain()) == 2
    finally:
        r.close()
