"""sources/otlp.py: the receiver's queue is bounded by bytes as well as spans.

A body holding no spans still costs its bytes until the next ``drain()``: under a flood of
such bodies the receiver sheds load (a retryable 429), counts what it shed, says so in
``stats()``, and the bytes it holds never exceed its bound.
"""

from __future__ import annotations

import threading

import httpx
import pytest

from llmtop.sources import otlp
from llmtop.sources.otlp import OtlpReceiver

PB = {"Content-Type": "application/x-protobuf"}


def spanless(nbytes: int) -> bytes:
    """An OTLP export of one resource whose attribute pads it to about ``nbytes``: no spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    kv = req.resource_spans.add().resource.attributes.add()
    kv.key = "pad"
    kv.value.string_value = "x" * (nbytes - 32)
    return req.SerializeToString()


def test_spanless_bodies_are_shed_once_the_default_byte_bound_is_reached():
    body = spanless(otlp.MAX_BODY - 64)  # near the largest body, and no span in it
    rx = OtlpReceiver("127.0.0.1", 0)
    try:
        with httpx.Client(timeout=10) as c:
            codes = [c.post(rx.url, content=body, headers=PB).status_code for _ in range(12)]
        st = rx.stats()
        kept = sum(len(x.body) for x in rx.drain())
    finally:
        rx.close()
    assert 429 in codes and codes[0] == 200
    assert st["dropped_bodies"] == codes.count(429) and st["bodies"] == codes.count(200)
    assert st["dropped_bytes"] == codes.count(429) * len(body)
    assert kept <= otlp.MAX_PENDING_BYTES
    assert "flood" in st["last_error"]


def test_concurrent_senders_never_hold_more_than_the_bound():
    cap = 256 * 1024
    body = spanless(60 * 1024)
    rx = OtlpReceiver("127.0.0.1", 0, max_body=128 * 1024, max_pending_bytes=cap)
    peak = [0]
    stop = threading.Event()

    def watch() -> None:  # the receiver's own count of what it holds, read while it fills
        while not stop.is_set():
            peak[0] = max(peak[0], rx.stats()["pending_bytes"])

    def send(codes: list[int]) -> None:
        with httpx.Client(timeout=10) as c:
            codes.extend(c.post(rx.url, content=body, headers=PB).status_code
                         for _ in range(6))

    results: list[list[int]] = [[] for _ in range(6)]
    threads = [threading.Thread(target=send, args=(r,)) for r in results]
    w = threading.Thread(target=watch)
    try:
        w.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        stop.set()
        w.join(5)
        st = rx.stats()
        held = sum(len(x.body) for x in rx.drain())
        after = rx.stats()["pending_bytes"]
        with httpx.Client(timeout=10) as c:  # drained: room again
            again = c.post(rx.url, content=body, headers=PB).status_code
    finally:
        stop.set()
        rx.close()
    codes = [c for r in results for c in r]
    assert sorted(set(codes)) == [200, 429]
    assert held <= cap and peak[0] <= cap and st["pending_bytes"] == held
    assert st["bodies"] == codes.count(200) == held // len(body)
    assert st["dropped_bodies"] == codes.count(429)
    assert after == 0 and again == 200


def test_a_shed_body_is_answered_retryable():
    body = spanless(100 * 1024)
    rx = OtlpReceiver("127.0.0.1", 0, max_body=128 * 1024, max_pending_bytes=150 * 1024)
    try:
        with httpx.Client(timeout=10) as c:
            first = c.post(rx.url, content=body, headers=PB)
            second = c.post(rx.url, content=body, headers=PB)
    finally:
        rx.close()
    assert first.status_code == 200
    assert second.status_code == 429 and second.headers["retry-after"] == "1"


@pytest.mark.parametrize("nbytes", [0, 1])
def test_an_empty_queue_takes_any_body_up_to_the_bound(nbytes):
    rx = OtlpReceiver("127.0.0.1", 0, max_body=64 * 1024, max_pending_bytes=64 * 1024)
    try:
        body = spanless(64 * 1024 - nbytes * 100)
        r = httpx.post(rx.url, content=body, headers=PB, timeout=10)
        assert r.status_code == 200 and rx.stats()["pending_bytes"] == len(body)
    finally:
        rx.close()


def test_a_gzip_body_is_held_at_its_unpacked_size():
    import gzip

    body = spanless(60 * 1024)  # packs to a few hundred bytes
    packed = gzip.compress(body)
    rx = OtlpReceiver("127.0.0.1", 0, max_body=128 * 1024, max_pending_bytes=100 * 1024)
    try:
        with httpx.Client(timeout=10) as c:
            hdr = {**PB, "Content-Encoding": "gzip"}
            first = c.post(rx.url, content=packed, headers=hdr).status_code
            held = rx.stats()["pending_bytes"]
            second = c.post(rx.url, content=packed, headers=hdr)
        st = rx.stats()
    finally:
        rx.close()
    assert len(packed) < 2048 and first == 200 and held == len(body)
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert st["dropped_bodies"] == 1 and st["dropped_bytes"] == len(body)
    assert st["pending_bytes"] == len(body)  # the shed one gave back what it reserved
