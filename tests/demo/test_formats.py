"""The demo's /metrics against the real engines' fixtures: names, types, labels, buckets."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import fixture_text
from tests.demo.conftest import stream_request

DATA = Path(__file__).parent / "data"


def shape(text: str) -> dict[str, tuple[str, frozenset[str], tuple[str, ...]]]:
    """family -> (type, label names, bucket bounds) (ignoring any '# source' comment lines)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        labels: set[str] = set()
        les: list[str] = []
        for s in fam.samples:
            labels |= set(s.labels)
            if s.name.endswith("_bucket") and s.labels.get("le") not in les:
                les.append(s.labels["le"])
        labels.discard("le")
        out[fam.name] = (fam.type, frozenset(labels), tuple(les))
    return out


def helps(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _sp, doc = line[7:].partition(" ")
            out[name] = doc
    return out


async def _exercise(server) -> dict[str, str]:
    """Send a few streaming/non-streaming requests to every engine, return /metrics bodies."""
    out = {}
    async with aiohttp.ClientSession() as s:
        for es in server.sites:
            for chat in (False, True):
                await stream_request(s, es.base_url, chat=chat, prompt="a b c " * 30,
                                     max_tokens=5)
            async with s.post(es.base_url + "/v1/completions",
                              json={"prompt": "a b c " * 30, "max_tokens": 3}) as r:
                assert r.status == 200
            async with s.get(es.base_url + "/metrics") as r:
                assert r.status == 200
                out[es.kind] = await r.text()
    return out


def _compare(demo: str, real: str, *, min_families: int) -> None:
    d, r = shape(demo), shape(real)
    assert len(d) >= min_families
    missing = sorted(set(d) - set(r))
    assert not missing, f"families not in the real engine's output: {missing}"
    for name, (typ, labels, les) in d.items():
        rt, rl, rles = r[name]
        assert typ == rt, name
        assert labels == rl, (name, labels, rl)
        assert les == rles, (name, les, rles)
    rh, dh = helps(real), helps(demo)
    for name, doc in dh.items():
        assert rh.get(name) == doc, name


def vllm_real() -> str:
    """A full vLLM 0.33.0 render plus the ``--enable-mfu-metrics`` counters (three, and
    their ``_created``) as a real vLLM 0.32 wrote them (the 0.33 render is without the
    flag)."""
    mfu = [line for line in fixture_text("vllm-real-cpu-v0.32.0-calm-b.txt").splitlines()
           if "vllm:estimated_" in line]
    assert len(shape("\n".join(mfu) + "\n")) == 6
    return fixture_text("vllm-generated-v0.33.0-loggers.txt") + "\n".join(mfu) + "\n"


async def test_vllm_matches_fixture(demo_factory):
    server = await demo_factory(("vllm",))
    bodies = await _exercise(server)
    real = vllm_real()
    _compare(bodies["vllm"], real, min_families=70)
    # every family of the real vLLM output is there (the 0.33.0 render and the MFU counters)
    assert set(shape(real)) == set(shape(bodies["vllm"]))
    assert "vllm:prompt_tokens_created{" in bodies["vllm"]
    assert 'vllm:request_success_total{engine="0",finished_reason="length",model_name=' \
        in bodies["vllm"]


async def test_sglang_matches_fixture(demo_factory):
    server = await demo_factory(("sglang",))
    bodies = await _exercise(server)
    body = bodies["sglang"]
    _compare(body, fixture_text("sglang-generated-v0.5.23-metrics_collector.txt"),
             min_families=70)
    assert "_created" not in body  # multiprocess mode
    assert 'sglang:num_retracted_reqs{engine_type="unified",model_name=' in body
    assert ',pid="' in body
    assert 'is_streaming="true"' in body and 'is_streaming="false"' in body
    # as a real 0.5.23 server: a labelled counter is absent until it first counts, and at
    # idle the scheduler's decode tokens + one per finished request (its first token, made
    # by prefill) = the finished-request counter
    assert "sglang:num_retracted_requests_total" not in body
    from llmtop.parse import sglang
    from llmtop.parse.exposition import parse

    (m,) = sglang.normalize(body).models
    gen = parse(body)["sglang:generation_tokens"].samples
    assert m.counters["generation_tokens"] == sum(s.value for s in gen) > 0
    assert m.counters["preemptions"] == 0.0


async def test_triton_matches_fixture(demo_factory):
    server = await demo_factory(("triton",))
    server.sites[0].gpu.update()
    bodies = await _exercise(server)
    body = bodies["triton"]
    real = "".join((
        fixture_text("triton-trtllm_backend-readme.txt"),
        (DATA / "triton-nv_gpu-reference.txt").read_text(),
        # current TRT-LLM backend + --metrics-config histogram_latencies=true (no real capture
        # exists; built from the sources, see their '# source:' lines)
        fixture_text("triton-trtllm_backend-SYNTHETIC-from-custom_metrics_reporter-cc.txt"),
        fixture_text("triton-SYNTHETIC-from-core-metrics-cc.txt"),
    ))
    _compare(body, real, min_families=23)
    assert {"nv_llm_input_token_len", "nv_llm_output_token_len",
            "nv_inference_first_response_histogram_ms"} <= set(shape(body))
    assert "_created" not in body and "_total{" not in body
    assert 'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="tokens_per",model=' \
        '"tensorrt_llm",version="1"} 64\n' in body
    assert "nv_inference_request_success{model=\"tensorrt_llm\",version=\"1\"} 3\n" in body
    # one observation per request: 2 streaming (first token) + 1 non-streaming (whole response)
    v = shape_values(body)
    assert v["nv_llm_input_token_len_count"] == 3 and v["nv_llm_output_token_len_count"] == 3
    assert v["nv_llm_output_token_len_sum"] >= 2 * 5 + 1
    assert v["nv_llm_input_token_len_sum"] >= 3 * 90
    assert v["nv_inference_first_response_histogram_ms_count"] == 3
    assert v["nv_inference_first_response_histogram_ms_bucket|+Inf"] == 3
    # series lines as Triton's prometheus-cpp writes them (le last, whole-number bounds)
    assert 'nv_llm_output_token_len_bucket{model="tensorrt_llm",response_metric_type=' \
        '"total_output_tokens",version="1",le="10"} ' in body
    assert 'nv_inference_first_response_histogram_ms_bucket{model="tensorrt_llm",version="1",' \
        'le="5000"} 3\n' in body
    assert body.index("nv_inference_first_response_histogram_ms_count{") < body.index(
        "nv_inference_first_response_histogram_ms_bucket{")
    sums = [ln for ln in body.splitlines() if ln.startswith("nv_inference_first_response_"
                                                           "histogram_ms_sum{")]
    assert sums and "." not in sums[0].rsplit(" ", 1)[1]  # whole milliseconds


async def test_counters_monotonic_and_histograms_consistent(demo_factory):
    server = await demo_factory(("vllm",))
    async with aiohttp.ClientSession() as s:
        base = server.sites[0].base_url
        await stream_request(s, base, max_tokens=4)
        async with s.get(base + "/metrics") as r:
            a = shape_values(await r.text())
        await stream_request(s, base, max_tokens=4)
        async with s.get(base + "/metrics") as r:
            b = shape_values(await r.text())
    for k, v in a.items():
        if k.endswith("_total") or k.endswith("_count") or "_bucket" in k:
            assert b[k] >= v, k
    assert b["vllm:generation_tokens_total"] == 8.0
    assert b["vllm:request_success_total|length"] == 2.0
    assert b["vllm:time_to_first_token_seconds_count"] == 2.0


def shape_values(text: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name
            if "finished_reason" in s.labels:
                key += "|" + s.labels["finished_reason"]
            elif "le" in s.labels:
                key += "|" + s.labels["le"]
            elif s.labels.get("source"):
                key += "|" + s.labels["source"]
            out[key] = s.value
    return out


async def test_vllm_phase_and_length_histograms_add_up(demo_factory):
    """The families diagnosis reads (queue/prefill/decode/inference time, prompt/generation
    length, tokens per step) are observed once per request (per step) and agree with the
    counters, as vLLM's do; llmtop's parser turns them into row quantiles."""
    server = await demo_factory(("vllm",))
    bodies = await _exercise(server)
    v = shape_values(bodies["vllm"])
    n = v["vllm:e2e_request_latency_seconds_count"]
    assert n == 3
    for fam in ("queue", "prefill", "decode", "inference"):
        assert v[f"vllm:request_{fam}_time_seconds_count"] == n, fam
    assert v["vllm:request_inference_time_seconds_sum"] == pytest.approx(
        v["vllm:request_prefill_time_seconds_sum"] + v["vllm:request_decode_time_seconds_sum"])
    assert v["vllm:request_prompt_tokens_count"] == n
    assert v["vllm:request_prompt_tokens_sum"] == v["vllm:prompt_tokens_total"] == 3 * 90
    assert v["vllm:request_generation_tokens_sum"] == v["vllm:generation_tokens_total"] == 13
    # every step: its prompt tokens computed plus one token per decoding request
    assert v["vllm:iteration_tokens_total_sum"] == (
        v["vllm:prompt_tokens_by_source_total|local_compute"] + v["vllm:generation_tokens_total"]
        - v["vllm:request_prompt_tokens_count"])  # a prefill's step also samples its token
    from llmtop.parse import registry

    m = registry.normalize("vllm", bodies["vllm"]).models[0]
    assert {"queue", "prefill", "decode", "inference", "prompt_len", "gen_len",
            "iteration_tokens"} <= set(m.hists)


async def test_sglang_lengths_queue_and_spec_decode_gauges(demo_factory):
    server = await demo_factory(("sglang",))
    server.sites[0].engine.spec_accept = 0.7  # the spec-decode-drop scenario's SGLang
    bodies = await _exercise(server)
    body = bodies["sglang"]
    _compare(body, fixture_text("sglang-generated-v0.5.23-metrics_collector.txt"),
             min_families=70)
    v = shape_values(body)
    total = {name: sum(s.value for f in text_string_to_metric_families(body)
                       for s in f.samples if s.name == name)
             for name in ("sglang:prompt_tokens_total", "sglang:generation_tokens_total")}
    assert v["sglang:queue_time_seconds_count"] == 3
    assert v["sglang:prompt_tokens_histogram_sum"] == total["sglang:prompt_tokens_total"] == 270
    assert v["sglang:generation_tokens_histogram_sum"] == total["sglang:generation_tokens_total"]
    assert v["sglang:spec_num_steps"] == 3 and v["sglang:spec_num_draft_tokens"] == 4
    assert v["sglang:spec_accept_rate"] == pytest.approx(0.7, abs=0.05)
    assert v["sglang:spec_accept_length"] == pytest.approx(1 + 3 * v["sglang:spec_accept_rate"])
    from llmtop.parse import registry

    m = registry.normalize("sglang", body).models[0]
    assert m.gauges["spec_accept_rate_gauge"] == pytest.approx(0.7, abs=0.05)
    assert {"queue", "prompt_len", "gen_len"} <= set(m.hists)


async def test_vllm_spec_decode_counters_match_the_source(demo_factory):
    """With speculative decoding on (``spec-decode-drop``) the demo vLLM adds the four
    ``vllm:spec_decode_*`` counters of ``vllm/v1/spec_decode/metrics.py``; accepted / drafted
    tokens is the acceptance rate and llmtop's row reads it from them."""
    server = await demo_factory(("vllm",))
    server.sites[0].engine.spec_accept = 0.72
    body = (await _exercise(server))["vllm"]
    spec = (DATA / "vllm-spec_decode-SYNTHETIC-from-spec_decode-metrics-py.txt").read_text()
    _compare(body, vllm_real() + spec, min_families=70)
    assert set(shape(body)) - set(shape(vllm_real())) == set(shape(spec))
    v = shape_values(body)
    drafts = v["vllm:spec_decode_num_drafts_total"]
    assert drafts > 0 and v["vllm:spec_decode_num_draft_tokens_total"] == 3 * drafts
    rate = v["vllm:spec_decode_num_accepted_tokens_total"] / (3 * drafts)
    assert rate == pytest.approx(0.72, abs=0.05)
    per_pos = [s.value for f in text_string_to_metric_families(body) for s in f.samples
               if s.name == "vllm:spec_decode_num_accepted_tokens_per_pos_total"]
    assert len(per_pos) == 3 and per_pos == sorted(per_pos, reverse=True)
    from llmtop.parse import registry

    m = registry.normalize("vllm", body).models[0]
    assert m.counters["spec_drafts"] == drafts
