"""The demo vLLM's request spans, as the real vLLM sends them over OTLP/HTTP protobuf.

One ``llm_request`` span per finished request, with exactly the attributes, value types,
order, span kind, flags, scope and resource attributes of the real vLLM 0.32's bodies
(``tests/fixtures/spans/vllm-real-cpu-v0.32.0-requests.b64``): no finish reason and no model
name (the real span has neither). The numbers are the simulated request's own: vLLM's
``time_in_queue`` (arrival -> scheduled), ``time_in_model_prefill`` (scheduled -> first
token), ``time_in_model_decode`` (first -> last token), ``time_in_model_inference`` (their
sum), ``time_to_first_token``, ``e2e`` and the token counts. A request sent with a W3C
``traceparent`` keeps the caller's trace id and has its span as parent, as vLLM does.

The protobuf (``ExportTraceServiceRequest`` of opentelemetry-proto) is written by hand, so
the demo child keeps to the standard library; llmtop's own decoder reads it back (tested).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SCOPE_VLLM", "Attr", "DemoSpan", "encode_export", "parse_traceparent",
           "vllm_resource", "vllm_span"]

SCOPE_VLLM = "vllm.tracing.otel"
_KIND_SERVER = 2
_FLAGS = 0x100  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE (what the real bodies carry)
_FLAGS_REMOTE_PARENT = 0x300

Attr = tuple[str, Any]


@dataclass(slots=True, frozen=True)
class DemoSpan:
    """One span to send (times in Unix ns, ids as bytes)."""

    name: str
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    start_ns: int
    end_ns: int
    attrs: tuple[Attr, ...]
    kind: int = _KIND_SERVER
    flags: int = _FLAGS


def parse_traceparent(value: str | None) -> tuple[bytes, bytes] | None:
    """(trace id, parent span id) of a W3C ``traceparent`` header, or None."""
    if not value:
        return None
    parts = value.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        tid, pid = bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return None
    return (tid, pid) if any(tid) and any(pid) else None


def vllm_resource(service: str, pid: int, instance: str) -> tuple[Attr, ...]:
    """The resource attributes of the real vLLM's spans (``service.name`` is the
    ``OTEL_SERVICE_NAME`` it was started with: here the demo engine's target name)."""
    return (("telemetry.sdk.language", "python"), ("telemetry.sdk.name", "opentelemetry"),
            ("telemetry.sdk.version", "1.45.2"), ("service.instance.id", instance),
            ("service.name", service), ("vllm.instrumenting_module_name", "vllm.llm_engine"),
            ("vllm.process_id", str(pid)))


def vllm_span(r: Any, rng: random.Random) -> DemoSpan | None:
    """The ``llm_request`` span of the finished simulated request ``r`` (``demo/sim.py``);
    None for one that never got a token (vLLM traces only requests it finished)."""
    if r.finish_t is None or r.first_token_t is None or r.admitted_t is None:
        return None
    rid = getattr(r, "req_id", None) or f"cmpl-{rng.getrandbits(64):016x}"
    parent = getattr(r, "trace", None)
    trace_id, parent_id = parent if parent else (rng.getrandbits(128).to_bytes(16, "big"), b"")
    last = r.last_token_t or r.finish_t
    attrs: tuple[Attr, ...] = (
        ("gen_ai.latency.time_to_first_token", float(r.first_token_t - r.arrival)),
        ("gen_ai.latency.e2e", float(r.finish_t - r.arrival)),
        ("gen_ai.latency.time_in_queue", float(r.admitted_t - r.arrival)),
        ("gen_ai.usage.prompt_tokens", int(r.prompt_len)),
        ("gen_ai.usage.completion_tokens", int(r.output)),
        ("gen_ai.latency.time_in_model_prefill", float(r.first_token_t - r.admitted_t)),
        ("gen_ai.latency.time_in_model_decode", float(last - r.first_token_t)),
        ("gen_ai.latency.time_in_model_inference", float(last - r.admitted_t)),
        ("gen_ai.request.id", f"{rid}-0"),
        ("gen_ai.request.top_p", 1.0),
        ("gen_ai.request.max_tokens", int(r.max_tokens)),
        ("gen_ai.request.n", 1),
    )
    return DemoSpan("llm_request", trace_id, rng.getrandbits(64).to_bytes(8, "big"), parent_id,
                    int(r.arrival * 1e9), int(r.finish_t * 1e9), attrs,
                    flags=_FLAGS_REMOTE_PARENT if parent else _FLAGS)


# -- protobuf wire format (field number << 3 | wire type) ---------------------------------
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64: negatives as two's complement
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _any_value(v: Any) -> bytes:
    if isinstance(v, bool):
        return _varint(2 << 3) + _varint(int(v))
    if isinstance(v, int):
        return _varint(3 << 3) + _varint(v)
    if isinstance(v, float):
        return _varint(4 << 3 | 1) + struct.pack("<d", v)
    return _ld(1, str(v).encode())


def _attrs(field: int, attrs: Sequence[Attr]) -> bytes:
    return b"".join(_ld(field, _ld(1, k.encode()) + _ld(2, _any_value(v))) for k, v in attrs)


def _span(s: DemoSpan) -> bytes:
    out = _ld(1, s.trace_id) + _ld(2, s.span_id)
    if s.parent_id:
        out += _ld(4, s.parent_id)
    out += _ld(5, s.name.encode()) + _varint(6 << 3) + _varint(s.kind)
    out += _varint(7 << 3 | 1) + struct.pack("<Q", s.start_ns)
    out += _varint(8 << 3 | 1) + struct.pack("<Q", s.end_ns)
    out += _attrs(9, s.attrs) + _ld(15, b"")  # an empty status, as the SDK writes
    return out + _varint(16 << 3 | 5) + struct.pack("<I", s.flags)


def encode_export(groups: Sequence[tuple[tuple[Attr, ...], str, Sequence[DemoSpan]]]) -> bytes:
    """An ``ExportTraceServiceRequest``: per (resource attributes, scope name, spans) one
    ``ResourceSpans`` with one ``ScopeSpans``."""
    body = b""
    for resource, scope, spans in groups:
        scope_spans = _ld(1, _ld(1, scope.encode())) + b"".join(_ld(2, _span(s)) for s in spans)
        body += _ld(1, _ld(1, _attrs(1, resource)) + _ld(2, scope_spans))
    return body
