"""sources/otlp_grpc.py: OTLP/gRPC TraceService/Export into the same queue."""

from __future__ import annotations

import pytest

from llmtop.sources.otlp import OtlpReceiver
from tests.spans.spanfix import bodies

grpc = pytest.importorskip("grpc")


@pytest.fixture
def rx():
    from llmtop.sources.otlp_grpc import start_grpc

    r = OtlpReceiver("127.0.0.1", 0, max_body=64 * 1024, max_pending_spans=5)
    _server, port = start_grpc(r, "127.0.0.1", 0)
    chan = grpc.insecure_channel(f"127.0.0.1:{port}")
    export = chan.unary_unary(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    yield r, export
    chan.close()
    r.close()


def test_grpc_export_is_queued_and_hostile_ones_refused(rx):
    r, export = rx
    [b] = bodies("requests")
    assert export(b, timeout=5) == b""  # an empty ExportTraceServiceResponse
    [got] = r.drain()
    assert got.transport == "grpc" and len(got.spans) == 3 and got.peer == "127.0.0.1"
    with pytest.raises(grpc.RpcError) as e:
        export(b"\xff\xfe garbage", timeout=5)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as e:
        export(b"\x00" * (100 * 1024), timeout=5)  # over max_body: gRPC refuses it itself
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    export(b, timeout=5)
    export(b, timeout=5)  # 6 pending > 5: the queue is full now
    with pytest.raises(grpc.RpcError) as e:
        export(b, timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    st = r.stats()
    assert (st["bodies"], st["bad"], st["dropped_bodies"]) == (3, 1, 1)


def test_grpc_token(tmp_path):
    from llmtop.httpserve import TokenFile
    from llmtop.sources.otlp_grpc import start_grpc

    tok = tmp_path / "tok"
    tok.write_text("s3cret")
    r = OtlpReceiver("127.0.0.1", 0, allows=TokenFile(str(tok)).allows)
    _s, port = start_grpc(r, "127.0.0.1", 0)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as chan:
            export = chan.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            [b] = bodies("requests")
            with pytest.raises(grpc.RpcError) as e:
                export(b, timeout=5)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
            export(b, timeout=5, metadata=(("authorization", "Bearer s3cret"),))
        assert len(r.drain()) == 1 and r.stats()["unauthorized"] == 1
    finally:
        r.close()


def test_grpc_bodies_without_spans_are_shed_at_the_byte_bound():
    from llmtop.sources.otlp_grpc import start_grpc
    from tests.spans.test_receiver_bytes import spanless

    r = OtlpReceiver("127.0.0.1", 0, max_body=64 * 1024, max_pending_bytes=100 * 1024)
    _server, port = start_grpc(r, "127.0.0.1", 0)
    chan = grpc.insecure_channel(f"127.0.0.1:{port}")
    export = chan.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
    try:
        body = spanless(40 * 1024)
        assert export(body, timeout=5) == b"" and export(body, timeout=5) == b""
        with pytest.raises(grpc.RpcError) as e:
            export(body, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE  # retryable
        st = r.stats()
        assert (st["bodies"], st["dropped_bodies"], st["pending_bytes"]) == (2, 1, 2 * len(body))
        r.drain()
        assert export(body, timeout=5) == b""
    finally:
        chan.close()
        r.close()
