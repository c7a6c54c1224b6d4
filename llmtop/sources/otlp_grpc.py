"""OTLP/gRPC ``TraceService/Export`` beside the HTTP receiver (the ``grpcio`` extra).

vLLM's exporter speaks gRPC unless told ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf``;
this listener takes those exports into the same ``OtlpReceiver`` queue, with the same
checks: a body over ``max_body`` is refused by gRPC itself (RESOURCE_EXHAUSTED), garbage is
INVALID_ARGUMENT, a missing token UNAUTHENTICATED, a full queue (spans or bytes) UNAVAILABLE
(retryable).
``grpcio`` is optional (``pip install 'llmtop-tui[otlp-grpc]'``): without it
``start_grpc`` raises ``ConfigError`` naming the install command.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from llmtop.errors import ConfigError
from llmtop.sources.otlp import Busy
from llmtop.sources.otlp_decode import partial_response
from llmtop.urls import netloc

__all__ = ["GRPC_INSTALL", "SERVICE", "start_grpc"]

GRPC_INSTALL = "pip install 'llmtop-tui[otlp-grpc]'"
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


def _peer(context: Any) -> str | None:
    p = context.peer() or ""  # ipv4:127.0.0.1:5555 / ipv6:[::1]:5555
    kind, _, rest = p.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None


def start_grpc(rx: Any, host: str, port: int, *, tls_cert: bytes | None = None,
               tls_key: bytes | None = None) -> tuple[Any, int]:
    """Serve gRPC ``TraceService/Export`` on ``host:port`` into ``rx`` (an ``OtlpReceiver``);
    returns (the grpc server, its port). ``rx.close()`` stops it."""
    try:
        import grpc
    except ImportError:
        raise ConfigError(f"--otlp-grpc-listen needs grpcio: {GRPC_INSTALL}") from None

    def export(body: bytes, context: Any) -> bytes:
        if rx.allows is not None:
            meta = dict(context.invocation_metadata() or ())
            if not rx.allows(meta.get("authorization")):
                rx.count("unauthorized", "a gRPC export without the right token")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "unauthorized")
        if not rx.reserve(len(body)):
            context.abort(grpc.StatusCode.UNAVAILABLE, "busy: queue full")
        try:
            why = rx.accept(body, "protobuf", _peer(context), "grpc", reserved=len(body))
        except Busy:
            context.abort(grpc.StatusCode.UNAVAILABLE, "busy: queue full")
        if isinstance(why, int):  # over the rate budget: rejected, not to be retried
            return partial_response(why, "llmtop: over its span rate budget")
        if why is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, why)
        return b""

    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Export": grpc.unary_unary_rpc_method_handler(export)})
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="llmtop-otlp"),
        handlers=(handler,), maximum_concurrent_rpcs=32,
        options=[("grpc.max_receive_message_length", rx.max_body)])
    addr = netloc(host, port)
    try:
        if tls_cert is not None:
            creds = grpc.ssl_server_credentials([(tls_key or tls_cert, tls_cert)])
            bound = server.add_secure_port(addr, creds)
        else:
            bound = server.add_insecure_port(addr)
    except RuntimeError as exc:
        raise ConfigError(f"--otlp-grpc-listen {addr}: {exc}") from None
    if not bound:
        raise ConfigError(f"--otlp-grpc-listen {addr}: cannot listen there")
    server.start()
    rx.grpc = server
    return server, bound
