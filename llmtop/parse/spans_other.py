"""Triton's and SGLang's request spans -> ``RequestRecord`` (vLLM's are in ``spans``).

Triton (``--trace-config mode=opentelemetry``, docs/user_guide/trace.md and
qa/L0_trace/opentelemetry_unittest.py of triton-inference-server/server): per request a
root span ``InferRequest``, a model span named after the model with the events
``REQUEST_START``, ``QUEUE_START``, ``REQUEST_END`` and the attributes ``model_name``,
``request_id``, and a child ``compute`` span with ``COMPUTE_START`` ... ``COMPUTE_END``.
Queue time is ``QUEUE_START`` -> ``COMPUTE_START``; Triton has no tokens, no TTFT.

SGLang (``--enable-trace``, python/sglang/srt/tracing/trace.py): a root span per request
(``[role] Req <rid[:8]>``, attribute ``rid``), a thread span under it, and under that the
stage slices, among them ``prefill_waiting`` (queue), ``prefill_forward`` and ``decode_loop``.
Only spans in the same batch are joined (read from the source, not run here).
"""

from __future__ import annotations

from llmtop.model.request_records import RequestRecord, source_of
from llmtop.sources.otlp_decode import Span

__all__ = ["SGLANG_STAGES", "other_requests", "sglang_requests", "triton_requests"]

SGLANG_STAGES = {"prefill_waiting": "queue_s", "prefill_forward": "prefill_s",
                 "decode_loop": "decode_s"}


def _events(span: Span) -> dict[str, int]:
    return {name: t for name, t, _a in span.events}


def _secs(a: int | None, b: int | None) -> float | None:
    if a is None or b is None or b < a or not a:
        return None
    return (b - a) / 1e9


def triton_requests(spans: list[Span]) -> tuple[list[RequestRecord], set[int]]:
    """Requests from Triton's model spans (joined to their ``compute`` child); and the
    indexes of the spans used."""
    used: set[int] = set()
    compute: dict[str, tuple[int, dict[str, int]]] = {}
    for i, s in enumerate(spans):
        if s.name == "compute" and "COMPUTE_START" in _events(s):
            compute[s.parent_id] = (i, _events(s))
        elif s.name == "InferRequest":
            used.add(i)  # the root: nothing llmtop needs beyond the model span
    out = []
    for i, s in enumerate(spans):
        ev = _events(s)
        if "QUEUE_START" not in ev or "REQUEST_START" not in ev:
            continue
        used.add(i)
        ci, cev = compute.get(s.span_id, (None, {}))
        if ci is not None:
            used.add(ci)
        rid = s.attrs.get("request_id")
        model = s.attrs.get("model_name")
        out.append(RequestRecord(
            id=str(rid) if rid not in (None, "") else s.span_id, engine="triton",
            queue_s=_secs(ev.get("QUEUE_START"), cev.get("COMPUTE_START")),
            prefill_s=_secs(cev.get("COMPUTE_START"), cev.get("COMPUTE_END")),
            e2e_s=_secs(ev.get("REQUEST_START"), ev.get("REQUEST_END")),
            source=source_of(s.trace_id), trace_id=s.trace_id or None,
            t_start=s.start_ns / 1e9 if s.start_ns else None,
            t_end=s.end_ns / 1e9 if s.end_ns else None,
            model=str(model) if model else None,
            service=s.resource.get("service.name") or None))
    return out, used


def _root_of(i: int, spans: list[Span], by_id: dict[str, int], roots: set[int]) -> int | None:
    for _ in range(6):  # slice -> thread span -> Req root (trace.py nests them so)
        j = by_id.get(spans[i].parent_id)
        if j is None:
            return None
        if j in roots:
            return j
        i = j
    return None


def sglang_requests(spans: list[Span]) -> tuple[list[RequestRecord], set[int]]:
    """Requests from SGLang's root spans (``[role] Req <rid8>``, attribute ``rid``) and the
    stage slices under them in the same batch."""
    by_id = {s.span_id: i for i, s in enumerate(spans)}
    roots = {i for i, s in enumerate(spans) if "Req " in s.name and "rid" in s.attrs}
    stages: dict[int, list[int]] = {}
    for i, s in enumerate(spans):
        if s.name in SGLANG_STAGES:
            r = _root_of(i, spans, by_id, roots)
            if r is not None:
                stages.setdefault(r, []).append(i)
    used: set[int] = set(roots)
    out = []
    for i in sorted(roots):
        s = spans[i]
        rec = RequestRecord(
            id=str(s.attrs["rid"]), engine="sglang", source=source_of(s.trace_id),
            trace_id=s.trace_id or None, t_start=s.start_ns / 1e9 if s.start_ns else None,
            t_end=s.end_ns / 1e9 if s.end_ns else None,
            e2e_s=_secs(s.start_ns, s.end_ns),
            service=s.resource.get("service.name") or None)
        for j in stages.get(i, []):
            used.add(j)
            st = spans[j]
            setattr(rec, SGLANG_STAGES[st.name], _secs(st.start_ns, st.end_ns))
        if rec.queue_s is not None and rec.prefill_s is not None:
            rec.ttft_s = rec.queue_s + rec.prefill_s
        out.append(rec)
    return out, used


def other_requests(spans: list[Span]) -> tuple[list[RequestRecord], int]:
    """Triton's and SGLang's requests in ``spans``; and how many spans were of no known use."""
    if not spans:
        return [], 0
    tri, used_t = triton_requests(spans)
    sgl, used_s = sglang_requests(spans)
    used = used_t | used_s
    unknown = sum(1 for i, s in enumerate(spans)
                  if i not in used and s.name not in SGLANG_STAGES and s.name != "compute")
    return tri + sgl, unknown
