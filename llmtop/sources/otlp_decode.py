"""Decode an OTLP trace export body (protobuf or JSON) into plain ``Span`` values.

The wire format is OpenTelemetry's ``ExportTraceServiceRequest`` (package
``opentelemetry-proto``): resource spans, each with its resource attributes (``service.name``)
and scope spans holding the spans. JSON-encoded OTLP (ids in hex, 64-bit integers as strings)
is read by hand, without protobuf's JSON mapping (which would take the ids for base64).
``decode`` raises ``SpanDecodeError`` with a short reason for anything it cannot read; it
never returns a partial batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_SPANS_PER_BODY", "OverBudget", "Span", "SpanDecodeError", "decode",
           "decode_json", "decode_protobuf", "empty_response", "partial_response"]

MAX_SPANS_PER_BODY = 100_000
"""A body claiming more spans than this is refused whole (an exporter batches 512)."""


class SpanDecodeError(ValueError):
    """The body is not an OTLP trace export this module can read."""


class OverBudget(Exception):
    """``admit`` refused the body's spans (a flood): nothing was converted."""

    def __init__(self, spans: int) -> None:
        super().__init__(f"{spans} spans over the rate budget")
        self.spans = spans


Admit = Callable[[int], bool] | None


@dataclass(slots=True)
class Span:
    """One span, as the engine sent it (times in Unix nanoseconds, ids in hex)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    """(name, time in Unix ns, attributes) per span event (Triton's QUEUE_START...)."""
    resource: dict[str, Any] = field(default_factory=dict)
    """The resource's attributes (``service.name`` ...), shared by its spans."""
    scope: str = ""
    status: int = 0
    """OTLP status code: 0 unset, 1 ok, 2 error."""


def _pb_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def _pb_attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in kvs}


def decode_protobuf(body: bytes, admit: Admit = None) -> list[Span]:
    """Spans of a protobuf ``ExportTraceServiceRequest``. ``admit(n)`` is asked with the
    span count once the message is parsed (cheap), before the spans are converted (dear);
    False raises ``OverBudget``."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise SpanDecodeError(f"not an OTLP protobuf trace export ({exc or 'truncated'})"
                              ) from None
    n = sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    if n > MAX_SPANS_PER_BODY:
        raise SpanDecodeError(f"more than {MAX_SPANS_PER_BODY} spans in one body")
    if admit is not None and n and not admit(n):
        raise OverBudget(n)
    out: list[Span] = []
    for rs in req.resource_spans:
        resource = _pb_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for s in ss.spans:
                out.append(Span(
                    name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                    parent_id=s.parent_span_id.hex(), start_ns=s.start_time_unix_nano,
                    end_ns=s.end_time_unix_nano, attrs=_pb_attrs(s.attributes),
                    events=[(e.name, e.time_unix_nano, _pb_attrs(e.attributes))
                            for e in s.events],
                    resource=resource, scope=scope, status=int(s.status.code)))
    return out


def _js_value(v: Any) -> Any:
    if not isinstance(v, dict) or not v:
        return None
    kind, val = next(iter(v.items()))
    if kind == "intValue":
        return int(val)
    if kind == "doubleValue":
        return float(val)
    if kind == "arrayValue":
        return [_js_value(x) for x in (val or {}).get("values", [])]
    if kind == "kvlistValue":
        return _js_attrs((val or {}).get("values", []))
    return val


def _js_attrs(kvs: Any) -> dict[str, Any]:
    if not isinstance(kvs, list):
        return {}
    return {kv["key"]: _js_value(kv.get("value")) for kv in kvs
            if isinstance(kv, dict) and isinstance(kv.get("key"), str)}


def decode_json(body: bytes, admit: Admit = None) -> list[Span]:
    """Spans of a JSON-encoded OTLP trace export (``admit`` as for ``decode_protobuf``)."""
    try:
        doc = json.loads(body)
        n = sum(len(ss.get("spans") or []) for rs in doc.get("resourceSpans") or []
                for ss in rs.get("scopeSpans") or [])
        if admit is not None and n and not admit(n):
            raise OverBudget(n)
        out: list[Span] = []
        for rs in doc.get("resourceSpans") or []:
            resource = _js_attrs((rs.get("resource") or {}).get("attributes"))
            for ss in rs.get("scopeSpans") or []:
                scope = str((ss.get("scope") or {}).get("name") or "")
                spans = ss.get("spans") or []
                if len(out) + len(spans) > MAX_SPANS_PER_BODY:
                    raise SpanDecodeError(f"more than {MAX_SPANS_PER_BODY} spans in one body")
                for s in spans:
                    out.append(Span(
                        name=str(s.get("name") or ""), trace_id=str(s.get("traceId") or ""),
                        span_id=str(s.get("spanId") or ""),
                        parent_id=str(s.get("parentSpanId") or ""),
                        start_ns=int(s.get("startTimeUnixNano") or 0),
                        end_ns=int(s.get("endTimeUnixNano") or 0),
                        attrs=_js_attrs(s.get("attributes")),
                        events=[(str(e.get("name") or ""), int(e.get("timeUnixNano") or 0),
                                 _js_attrs(e.get("attributes"))) for e in s.get("events") or []],
                        resource=resource, scope=scope,
                        status=int((s.get("status") or {}).get("code") or 0)))
    except (SpanDecodeError, OverBudget):
        raise
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        raise SpanDecodeError(f"not an OTLP JSON trace export ({type(exc).__name__})") from None
    return out


def decode(body: bytes, kind: str, admit: Admit = None) -> list[Span]:
    """Spans of ``body``; ``kind`` is ``protobuf`` or ``json``."""
    if kind == "json":
        return decode_json(body, admit)
    return decode_protobuf(body, admit)


def empty_response(kind: str = "protobuf") -> bytes:
    """An empty ``ExportTraceServiceResponse`` (all spans accepted)."""
    return b"{}" if kind == "json" else b""


def partial_response(rejected: int, message: str, kind: str = "protobuf") -> bytes:
    """An ``ExportTraceServiceResponse`` saying ``rejected`` spans were dropped (no retry)."""
    if kind == "json":
        return json.dumps({"partialSuccess": {"rejectedSpans": str(rejected),
                                              "errorMessage": message}}).encode()
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    resp = ExportTraceServiceResponse()
    resp.partial_success.rejected_spans = rejected
    resp.partial_success.error_message = message
    return resp.SerializeToString()
