"""parse/spans.py and spans_other.py on the real vLLM spans and the Triton/SGLang shapes."""

from __future__ import annotations

import re

from llmtop.model.request_records import PROBE_TRACE_PREFIX, probe_traceparent, source_of
from llmtop.parse.spans import parse_spans
from llmtop.sources.otlp_decode import Span, decode
from tests.spans.spanfix import bodies, note


def _parse(name: str):
    spans = [s for b in bodies(name) for s in decode(b, "protobuf")]
    return parse_spans(spans)


def test_real_vllm_requests_match_what_was_sent():
    p = _parse("requests")
    # the usage the responses reported, in the fixture's note: "<id> prompt/completion"
    sent = re.findall(r"(cmpl-[0-9a-f]+) (\d+)/(\d+)", note("requests"))
    got = {r.id: r for r in p.requests}
    assert len(sent) == 3 and len(got) == 3 and p.unknown == 0
    for rid, prompt, out in sent:
        r = got[rid + "-0"]  # vLLM's span id: the response id plus "-0"
        assert (r.prompt_tokens, r.output_tokens) == (int(prompt), int(out))
        assert r.engine == "vllm" and r.service == "vllm-tiny"
        assert 0 < r.ttft_s <= r.e2e_s and r.queue_s is not None and r.queue_s < 0.01
        assert r.prefill_s is not None and r.decode_s is not None
        assert r.finish_reason is None  # vLLM's span does not carry it: missing, not ""
        assert r.t_end > r.t_start > 1.7e9
    traced = [r for r in p.requests if r.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"]
    assert len(traced) == 1 and traced[0].prompt_tokens == 150  # the caller's trace id kept
    assert {r.source for r in p.requests} == {"traffic"}


def test_real_vllm_burst_shows_queueing():
    p = _parse("burst")  # six at once on --max-num-seqs 2
    assert len(p.requests) == 6
    queued = sorted(r.queue_s for r in p.requests)
    assert queued[1] < 0.01 < 0.2 < queued[2]  # two ran at once, four waited
    assert all(r.output_tokens == 64 for r in p.requests)


def test_real_vllm_startup_is_a_cold_start():
    p = _parse("startup")
    assert p.requests == [] and p.unknown == 0
    [cs] = p.cold_starts
    st = cs.stages
    assert {"weights", "kv_cache", "model_init", "total"} <= set(st)
    assert 0 < st["weights"] < st["total"] and 0 < st["kv_cache"] < st["total"]
    assert st["Executor init"] > 0  # other start-up spans keep their own names


def test_probe_trace_ids_are_marked():
    tp = probe_traceparent()
    version, trace, parent, flags = tp.split("-")
    assert (version, flags, len(trace), len(parent)) == ("00", "01", 32, 16)
    assert trace.startswith(PROBE_TRACE_PREFIX) and source_of(trace) == "probe"
    assert source_of("4bf92f3577b34da6a3ce929d0e0e4736") == "traffic"
    assert source_of(None) == source_of("") == "traffic"
    assert probe_traceparent() != tp
    span = Span(name="llm_request", trace_id=trace, span_id="ab", parent_id="", start_ns=1,
                end_ns=2, attrs={"gen_ai.request.id": "x-0"})
    [r] = parse_spans([span]).requests
    assert r.source == "probe" and r.prompt_tokens is None  # missing stays None


def _ev(name: str, t: int) -> tuple[str, int, dict]:
    return (name, t, {})


def test_triton_model_and_compute_spans():
    # SYNTHETIC values; span and event names from triton-inference-server/server
    # qa/L0_trace/opentelemetry_unittest.py and docs/user_guide/trace.md
    ms = 1_000_000
    root = Span("InferRequest", "t1", "r1", "", 0, 100 * ms)
    model = Span("simple", "t1", "m1", "r1", 1 * ms, 90 * ms,
                 attrs={"model_name": "simple", "request_id": "42"},
                 events=[_ev("REQUEST_START", 1 * ms), _ev("QUEUE_START", 2 * ms),
                         _ev("REQUEST_END", 90 * ms)],
                 resource={"service.name": "triton-inference-server"})
    comp = Span("compute", "t1", "c1", "m1", 30 * ms, 80 * ms,
                events=[_ev("COMPUTE_START", 32 * ms), _ev("COMPUTE_INPUT_END", 33 * ms),
                        _ev("COMPUTE_OUTPUT_START", 79 * ms), _ev("COMPUTE_END", 80 * ms)])
    p = parse_spans([root, model, comp])
    [r] = p.requests
    assert (r.engine, r.id, r.model) == ("triton", "42", "simple")
    assert abs(r.queue_s - 0.030) < 1e-9 and abs(r.prefill_s - 0.048) < 1e-9
    assert abs(r.e2e_s - 0.089) < 1e-9 and r.ttft_s is None and r.prompt_tokens is None
    assert p.unknown == 0


def test_sglang_root_and_stage_slices():
    # SYNTHETIC values; names from sgl-project/sglang python/sglang/srt/tracing/trace.py
    ms, t0 = 1_000_000, 1_796_000_000 * 10**9
    root = Span(" Req 9f2c1a77", "t2", "r", "b", t0, t0 + 500 * ms,
                attrs={"rid": "9f2c1a77e0"})
    thread = Span("Scheduler (host:abcd | pid:7)", "t2", "th", "r", t0, t0 + 500 * ms)
    waiting = Span("prefill_waiting", "t2", "w", "th", t0, t0 + 120 * ms)
    fwd = Span("prefill_forward", "t2", "f", "th", t0 + 120 * ms, t0 + 150 * ms)
    dec = Span("decode_loop", "t2", "d", "th", t0 + 150 * ms, t0 + 500 * ms)
    other = Span("some other library's span", "t3", "x", "", 0, 1)
    p = parse_spans([root, thread, waiting, fwd, dec, other])
    [r] = p.requests
    assert (r.engine, r.id) == ("sglang", "9f2c1a77e0")
    assert abs(r.queue_s - 0.12) < 1e-9 and abs(r.ttft_s - 0.15) < 1e-9
    assert abs(r.decode_s - 0.35) < 1e-9 and abs(r.e2e_s - 0.5) < 1e-9
    assert p.unknown == 2  # the thread span and the foreign one: counted, not errors
