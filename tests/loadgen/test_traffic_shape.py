"""Load shaped like production: lengths drawn from real engine histograms, datasets, seeds."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from llmtop.loadgen.dataset import DatasetError, load_dataset
from llmtop.loadgen.prompts import Calibration, PromptFactory
from llmtop.loadgen.shape import LengthDist, window_dist
from llmtop.loadgen.traffic import TrafficError, _from_sample, build_traffic, lifetime_reason
from llmtop.model import Hist
from llmtop.parse.registry import normalize

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def _signals(name: str, engine: str, t: float = 1000.0):
    sample = normalize(engine, (FIX / name).read_text())
    return _from_sample(name, engine, t, sample)


REAL = [("vllm-real-cpu-v0.32.0-under-load.txt", "vllm"),
        ("vllm-generated-v0.33.0-loggers.txt", "vllm"),
        ("sglang-generated-v0.5.23-metrics_collector.txt", "sglang")]


def _chi2_ok(dist: LengthDist, draws: list[int], cap: float | None) -> None:
    """Draws land in each bucket with the histogram's share (a chi-square test, 0.1 %)."""
    n = len(draws)
    total = dist.count
    chi2, dof = 0.0, 0
    for i, c in enumerate(dist.counts):
        lo = dist.bounds[i - 1] if i else 0.0
        hi = dist.bounds[i]
        got = sum(1 for d in draws if lo < d <= hi)
        want = n * c / total
        if want == 0:
            assert got == 0, f"bucket ({lo}, {hi}] is empty in the histogram, drew {got}"
            continue
        chi2 += (got - want) ** 2 / want
        dof += 1
    # chi-square 99.9th percentile for up to ~12 degrees of freedom stays below 35
    assert chi2 < 35, (chi2, dof)
    if cap is not None:
        assert max(draws) <= cap


@pytest.mark.parametrize("name,engine", REAL)
def test_drawn_lengths_follow_real_histograms(name, engine):
    sig = _signals(name, engine)
    for key in ("prompt_len", "gen_len"):
        dist, reset = window_dist(sig.hists[key])
        assert not reset
        rng = random.Random(42)
        draws = [dist.sample(rng, 4096) for _ in range(20_000)]
        _chi2_ok(dist, draws, 4096)
        # within a bucket: log-uniform, so the bucket's geometric middle splits it in half
        i = max(range(len(dist.counts)), key=lambda j: dist.counts[j])
        lo, hi = (dist.bounds[i - 1] if i else 1.0), dist.bounds[i]
        if math.isfinite(hi) and hi / max(lo, 1.0) >= 2:
            inside = [d for d in draws if lo < d <= hi]
            mid = math.sqrt(max(lo, 1.0) * hi)
            share = sum(1 for d in inside if d <= mid) / len(inside)
            assert 0.42 < share < 0.58, share


def test_windowed_histogram_and_reset_and_open_top_bucket():
    old = Hist((10.0, 100.0, math.inf), (5.0, 10.0, 10.0), 300.0, 10.0)
    new = Hist((10.0, 100.0, math.inf), (5.0, 10.0, 30.0), 5300.0, 30.0)
    dist, reset = window_dist(new, old)
    assert not reset and dist.counts == (0.0, 0.0, 20.0) and dist.mean == 250.0
    rng = random.Random(1)
    draws = [dist.sample(rng, 1000) for _ in range(2000)]
    assert min(draws) > 100 and max(draws) <= 1000  # open top bucket capped at the context
    draws = [dist.sample(rng) for _ in range(2000)]
    assert max(draws) <= 200  # no context known: up to twice the top bound
    _, reset = window_dist(old, new)  # counters went backwards: a restart
    assert reset


def test_traffic_summary_from_two_readings_and_clear_errors():
    a = _signals("vllm-real-cpu-v0.32.0-under-load.txt", "vllm", 1000.0)
    b = _signals("vllm-real-cpu-v0.32.0-under-load.txt", "vllm", 1600.0)
    for key in ("prompt_len", "gen_len"):
        h = a.hists[key]
        b.hists[key] = Hist(h.bounds, tuple(c + (10 if i >= 9 else 0)
                                            for i, c in enumerate(h.cumulative)),
                            h.sum + 7000, h.count + 10)
    b.counters["prefix_queries"] = a.counters["prefix_queries"] + 1000
    b.counters["prefix_hits"] = a.counters["prefix_hits"] + 250
    t = build_traffic(a, b, lengths=True, prefix=True, window_s=600)
    assert t["window"].startswith("last 10 min")
    assert t["prompt"]["requests"] == 10 and t["prompt"]["mean"] == 700
    assert 500 < t["prompt"]["quantiles"]["p50"] <= 1000
    assert t["prefix_hit_rate"] == pytest.approx(0.25)
    life = build_traffic(a, None, lengths=True, prefix=False, window_s=600,
                         why_lifetime="engine up 3 min < 10 min window")
    assert life["window"] == "lifetime (engine up 3 min < 10 min window)"
    a.start_time = 1000.0 - 180
    assert lifetime_reason(a, 600) == "engine up 3 min < 10 min window"
    none = _signals("vllm-docs-usage-metrics.txt", "vllm")
    with pytest.raises(TrafficError, match=r"no prompt-length histogram.*--dataset"):
        build_traffic(none, None, lengths=True, prefix=False, window_s=0)


def _factory(**kw):
    return PromptFactory(model="m", endpoint="completions", calibration=Calibration("assumed"),
                         prompt_tokens=256, output_tokens=64, **kw)


def test_seed_makes_synthetic_runs_reproducible():
    sig = _signals("vllm-real-cpu-v0.32.0-under-load.txt", "vllm")
    p, _ = window_dist(sig.hists["prompt_len"])
    o, _ = window_dist(sig.hists["gen_len"])
    runs = []
    for seed in (7, 7, 8):
        f = _factory(seed=seed, prompt_dist=p, output_dist=o, context=1024, prefix_share=0.5)
        runs.append([f.next_payload() for _ in range(50)])
    assert runs[0] == runs[1] and runs[0] != runs[2]
    f = _factory(seed=1, prompt_dist=p, output_dist=o, context=300)
    for _ in range(200):
        f.next_payload()
        prompt, out = f.last_asked
        assert prompt + out <= 300


def test_prefix_share_starts_prompts_with_the_same_document():
    f = _factory(seed=3, prefix_share=0.5)
    a, b = f.text(400), f.text(400)
    shared = f.cal.words_for(200)
    assert a.split()[:shared] == b.split()[:shared]
    assert a != b


def test_dataset_jsonl_sharegpt_and_bad_lines(tmp_path):
    good = tmp_path / "d.jsonl"
    good.write_text('{"prompt": "hello there", "max_tokens": 5}\n\n'
                    '{"messages": [{"role": "user", "content": "hi"}]}\n')
    recs = load_dataset(str(good))
    assert recs[0].prompt == "hello there" and recs[0].max_tokens == 5
    assert recs[1].messages == ({"role": "user", "content": "hi"},)
    share = tmp_path / "s.json"
    share.write_text(json.dumps([{"id": "x", "conversations": [
        {"from": "human", "value": "Tell me a story"},
        {"from": "gpt", "value": "once upon a time there was"}]}]))
    (rec,) = load_dataset(str(share))
    assert rec.prompt == "Tell me a story" and rec.reply_words == 6
    f = _factory(seed=0, dataset=recs)
    body = json.loads(f.next_payload())
    assert "ignore_eos" not in body  # sent as written
    cases = {
        '{"prompt": "a"}\n{"prompt": "b"\n': "line 2: not valid JSON",
        '{"prompt": "a"}\n\n{"text": "b"}\n': "line 3: needs a non-empty 'prompt'",
        '{"prompt": "a", "max_tokens": -1}\n': "line 1: max_tokens must be a positive",
        '{"messages": [{"role": "user"}]}\n': "line 1: each message needs",
        '': "no requests",
    }
    for text, msg in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(text)
        with pytest.raises(DatasetError, match=msg):
            load_dataset(str(bad))
    share.write_text(json.dumps([{"conversations": [{"from": "gpt", "value": "x"}]}]))
    with pytest.raises(DatasetError, match="entry 0: no human turn"):
        load_dataset(str(share))


async def test_prometheus_lengths_and_prefix_rate_with_a_selector():
    import re
    from urllib.parse import parse_qs

    import httpx

    from llmtop.loadgen.traffic_prom import prometheus_traffic

    sig = _signals("vllm-real-cpu-v0.32.0-under-load.txt", "vllm")
    seen: list[str] = []

    def vector(items):
        return {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": m, "value": [0, str(v)]} for m, v in items]}}

    def handler(request: httpx.Request) -> httpx.Response:
        q = parse_qs(request.content.decode())["query"][0]
        seen.append(q)
        if "sglang" in q or "gpu_prefix" in q:
            return httpx.Response(200, json=vector([]))
        m = re.search(r"increase\(vllm:(\w+?)(_bucket|_sum|)\{", q)
        name, part = m.group(1), m.group(2)
        key = {"request_prompt_tokens": "prompt_len",
               "request_generation_tokens": "gen_len"}.get(name)
        if part == "_bucket":
            h = sig.hists[key]
            return httpx.Response(200, json=vector(
                [({"le": "+Inf" if math.isinf(b) else str(b)}, c)
                 for b, c in zip(h.bounds, h.cumulative, strict=True)]))
        if part == "_sum":
            return httpx.Response(200, json=vector([({}, sig.hists[key].sum)]))
        v = {"prefix_cache_hits_total": 30.0, "prefix_cache_queries_total": 120.0}[name]
        return httpx.Response(200, json=vector([({}, v)]))

    t = await prometheus_traffic("http://127.0.0.1:9090", 'namespace="prod"', 600,
                                 lengths=True, prefix=True,
                                 transport=httpx.MockTransport(handler))
    assert all('{namespace="prod"}[600s]' in q for q in seen), seen
    assert t["engine"] == "vllm" and t["prefix_hit_rate"] == pytest.approx(0.25)
    assert t["prompt"]["requests"] == 33 and 200 < t["prompt"]["quantiles"]["p50"] <= 500
    assert t["window"] == "last 10 min (Prometheus increase)"


def test_lengths_from_a_recording_use_its_last_window(tmp_path):
    from llmtop.config import Config, Target
    from llmtop.loadgen.traffic import recording_signals
    from llmtop.model import RawScrape
    from llmtop.record.recorder import Recorder

    body = (FIX / "vllm-real-cpu-v0.32.0-under-load.txt").read_text()
    later = body.replace(
        'vllm:request_prompt_tokens_bucket{engine="0",le="1000.0",model_name="tiny-llama"} 33.0',
        'vllm:request_prompt_tokens_bucket{engine="0",le="1000.0",model_name="tiny-llama"} 43.0'
    ).replace(
        'vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="tiny-llama"} 33.0',
        'vllm:request_prompt_tokens_bucket{engine="0",le="+Inf",model_name="tiny-llama"} 43.0')
    gen = 'vllm:request_generation_tokens_bucket{engine="0",le="+Inf",model_name="tiny-llama"}'
    later = later.replace(f"{gen} 33.0", f"{gen} 43.0")
    assert later != body
    path = tmp_path / "r.llmtop"
    tgt = Target("vllm@127.0.0.1:8000", "http://127.0.0.1:8000", engine="vllm")
    rec = Recorder(path, Config(targets=(tgt,)), clock=lambda: 1000.0)
    for t, text in ((1000.0, body), (1300.0, body), (1900.0, later)):
        rec.scrape(RawScrape(tgt.name, "http://127.0.0.1:8000/metrics", t, t, "ok", 200,
                             "text/plain", text, engine_hint="vllm"))
    rec.close()
    first, second = recording_signals(str(path), 600)
    assert (first.t_wall, second.t_wall) == (1300.0, 1900.0)
    t = build_traffic(first, second, lengths=True, prefix=False, window_s=600)
    assert t["prompt"]["requests"] == 10 and t["prompt"]["counts"][9] == 10  # (500, 1000]
    assert "in r.llmtop" in t["source"] and t["window"] == "last 10 min (two scrapes)"
    assert t["output"]["requests"] == 10 and t["output"]["counts"][-1] == 10  # open top
    first.hists["gen_len"] = second.hists["gen_len"]  # no output finished in the window
    t = build_traffic(first, second, lengths=True, prefix=False, window_s=600)
    assert t["window"] == ("lifetime (no requests finished in the window of the last 10 min)")
    assert t["prompt"]["requests"] == 43  # both lengths from the lifetime, never a mix


def test_the_model_with_most_prompts_speaks_for_the_engine():
    """Of several models, the one whose prompt-length histogram counts most gives the
    shape; a model without that histogram never wins over one with it."""
    from llmtop.model import EngineSample, ModelSample

    def model(name: str, prompts: float | None) -> ModelSample:
        m = ModelSample(model=name)
        if prompts is not None:
            m.hists["prompt_len"] = Hist((math.inf,), (prompts,), prompts * 10, prompts)
        return m

    sample = EngineSample(engine="vllm", models=[model("a", 3), model("none", None),
                                                 model("b", 40), model("c", 0)])
    sig = _from_sample("x", "vllm", 1000.0, sample)
    assert sig.hists["prompt_len"].count == 40
    only = EngineSample(engine="vllm", models=[model("none", None), model("c", 0)])
    assert _from_sample("x", "vllm", 1000.0, only).hists["prompt_len"].count == 0
