"""Engines' spans -> ``RequestRecord`` and ``ColdStart``: one function per span shape.

vLLM sends one ``llm_request`` span per finished request (``vllm/v1/engine/output_processor.py``,
attributes in ``vllm/tracing/utils.py``) and, at start-up, one span per loading stage.
SGLang and Triton shapes are in ``parse/spans_other.py``. A span of no known shape is
counted as unknown, never an error. Which row a request belongs to is the store's business
(``history.request_window``): here only the engine (from the shape) and ``service.name``.

The probe marks its requests (``request.source_of``): the engines keep the caller's trace id.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from llmtop.model.request_records import ColdStart, RequestRecord, source_of
from llmtop.parse.spans_other import other_requests
from llmtop.sources.otlp_decode import Span

__all__ = ["VLLM_STARTUP", "ParsedSpans", "parse_spans", "vllm_request"]

VLLM_STARTUP = {"Load weights": "weights", "Load model": "load_model",
                "Initialize model": "model_init", "Allocate KV cache": "kv_cache",
                "Prepare model": "prepare_model", "Overall Loading": "total"}
"""vLLM's start-up span names (its ``instrument(span_name=...)`` calls, seen from the real
vLLM 0.32) -> the cold-start stage llmtop names them. Its other start-up spans (``Executor
init``, ``Worker init``...) are kept under their own names."""


def _vllm_startup(span: Span) -> bool:
    return span.scope.startswith("vllm.") and span.name != "llm_request"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) and v >= 0 else None


def _int(v: Any) -> int | None:
    f = _num(v)
    return int(f) if f is not None else None


def _service(span: Span) -> str | None:
    s = span.resource.get("service.name")
    return s if isinstance(s, str) and s else None


def vllm_request(span: Span) -> RequestRecord | None:
    """vLLM's ``llm_request`` span; None when it lacks the request id."""
    a = span.attrs
    rid = a.get("gen_ai.request.id")
    if not isinstance(rid, str) or not rid:
        return None
    return RequestRecord(
        id=rid, engine="vllm", prompt_tokens=_int(a.get("gen_ai.usage.prompt_tokens")),
        output_tokens=_int(a.get("gen_ai.usage.completion_tokens")),
        queue_s=_num(a.get("gen_ai.latency.time_in_queue")),
        prefill_s=_num(a.get("gen_ai.latency.time_in_model_prefill")),
        decode_s=_num(a.get("gen_ai.latency.time_in_model_decode")),
        ttft_s=_num(a.get("gen_ai.latency.time_to_first_token")),
        e2e_s=_num(a.get("gen_ai.latency.e2e")),
        finish_reason=_str(a.get("gen_ai.response.finish_reasons")),
        source=source_of(span.trace_id), trace_id=span.trace_id or None,
        t_start=span.start_ns / 1e9 if span.start_ns else None,
        t_end=span.end_ns / 1e9 if span.end_ns else None,
        model=_str(a.get("gen_ai.response.model")), service=_service(span))


def _str(v: Any) -> str | None:
    if isinstance(v, list):
        v = ",".join(str(x) for x in v) if v else None
    return v if isinstance(v, str) and v else None


@dataclass(slots=True)
class ParsedSpans:
    """What one batch of spans gave."""

    requests: list[RequestRecord] = field(default_factory=list)
    cold_starts: list[ColdStart] = field(default_factory=list)
    unknown: int = 0
    """Spans of no shape llmtop reads (another library's, a stage it does not use)."""


def _vllm_cold(spans: list[Span]) -> list[ColdStart]:
    by_service: dict[str | None, ColdStart] = {}
    for s in spans:
        if not _vllm_startup(s) or s.end_ns < s.start_ns:
            continue
        stage = VLLM_STARTUP.get(s.name, s.name)
        cs = by_service.setdefault(_service(s), ColdStart(engine="vllm"))
        secs = round((s.end_ns - s.start_ns) / 1e9, 6)
        cs.stages[stage] = max(secs, cs.stages.get(stage, 0.0))  # "Worker init" comes twice
        end = s.end_ns / 1e9
        cs.t_wall = end if cs.t_wall is None else max(cs.t_wall, end)
    return list(by_service.values())


def parse_spans(spans: list[Span]) -> ParsedSpans:
    """Requests and cold starts in ``spans`` (one receiver body, or several)."""
    out = ParsedSpans()
    rest: list[Span] = []
    for s in spans:
        if s.name == "llm_request":
            r = vllm_request(s)
            if r is not None:
                out.requests.append(r)
                continue
        if _vllm_startup(s):
            continue
        rest.append(s)
    out.cold_starts = _vllm_cold(spans)
    more, out.unknown = other_requests(rest)
    out.requests.extend(more)
    return out
