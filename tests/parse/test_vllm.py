"""vLLM adapter: every normalized field on every fixture, exact values read from the text."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from llmtop.model import GAUGE_KEYS
from llmtop.parse import vllm
from llmtop.parse.exposition import Family, ParseError, Sample, parse
from tests.conftest import fixture_text


def one(name: str, **kw):
    s = vllm.normalize(fixture_text(name), **kw)
    assert s.engine == "vllm"
    assert len(s.models) == 1
    return s, s.models[0]


def test_generated_v0_33():
    s, m = one("vllm-generated-v0.33.0-loggers.txt", identity={"version": "0.33.0"})
    assert s.version == "0.33.0"
    assert s.start_time == 1.79533399995e09  # process_start_time_seconds
    assert s.ranks == []
    assert m.model == "Qwen/Qwen3-0.6B"
    assert m.gauges == {
        "running": 3.0,
        "waiting": 3.0,
        "waiting_deferred": 1.0,  # num_requests_waiting_by_reason{reason="deferred"}
        "kv_usage": 0.43,
        "kv_capacity_tokens": 446640.0,  # cache_config_info kv_cache_size_tokens
    }
    assert m.counters == {
        "prompt_tokens": 3072.0,
        "generation_tokens": 127.0,
        "preemptions": 1.0,
        "prefix_queries": 3072.0,
        "prefix_hits": 2048.0,
        "requests": 3.0,
        "aborted": 1.0,
        "errors": 0.0,
        "rejected": 0.0,
    }
    assert m.counters_by == {
        "finished": {"stop": 1.0, "length": 1.0, "abort": 1.0, "error": 0.0, "repetition": 0.0},
        # vllm:prompt_tokens_by_source (kv_series: where prompt tokens came from)
        "prompt_tokens": {"local_compute": 1024.0, "local_cache_hit": 2048.0,
                          "external_kv_transfer": 0.0},
        # vllm:prompt_tokens_cached_by_source: the KV tier that served the hits
        "cached_tokens": {"device": 2048.0, "host": 0.0, "p2p": 0.0, "disk": 0.0,
                          "external_unspecified": 0.0},
    }
    assert set(m.hists) == {"ttft", "itl", "tpot", "e2e", "queue", "prompt_len", "gen_len",
                            "prefill", "decode", "inference", "iteration_tokens"}
    ttft = m.hists["ttft"]
    assert ttft.count == 3.0 and ttft.sum == 0.182
    assert ttft.bounds[:8] == (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1)
    assert ttft.bounds[-1] == math.inf and len(ttft.bounds) == 23
    assert ttft.cumulative[:8] == (0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 3.0)
    assert (m.hists["itl"].count, m.hists["itl"].sum) == (124.0, 1.4879999999999982)
    assert (m.hists["tpot"].count, m.hists["tpot"].sum) == (3.0, 0.06895833333333334)
    assert (m.hists["e2e"].count, m.hists["e2e"].sum) == (3.0, 1.53)
    assert (m.hists["queue"].count, m.hists["queue"].sum) == (3.0, 0.012)
    pl = m.hists["prompt_len"]
    assert (pl.count, pl.sum) == (3.0, 1324.0)
    assert pl.bounds == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, math.inf)
    assert pl.cumulative == (0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 3, 3)
    assert (m.hists["gen_len"].count, m.hists["gen_len"].sum) == (3.0, 89.0)
    assert m.info["block_size"] == "16"
    assert m.info["num_gpu_blocks"] == "27915"
    assert m.info["enable_prefix_caching"] == "True"
    assert "engine" not in m.info
    assert "swapped" not in m.gauges and "max_running" not in m.gauges


def test_start_time_falls_back_to_earliest_created():
    text = fixture_text("vllm-generated-v0.33.0-loggers.txt")
    lines = text.split("\n")
    i = lines.index(
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds."
    )
    no_process = "\n".join(lines[:i] + lines[i + 3 :])
    s = vllm.normalize(no_process)
    assert s.start_time == 1.7953340009485707e09  # vllm:prefix_cache_queries_created
    s2 = vllm.normalize(fixture_text("edge-vllm-missing-family.txt"))
    assert s2.start_time == 1.7e09


def test_docs_design_model_name_only():
    s, m = one("vllm-docs-design-metrics.txt")
    assert m.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert s.ranks == [] and s.start_time is None and s.version is None
    assert m.gauges == {"running": 8.0}  # waiting/kv usage elided in the docs
    assert m.counters == {
        "generation_tokens": 27453.0,
        "requests": 132.0,
        "aborted": 0.0,
    }
    assert m.counters_by == {"finished": {"stop": 1.0, "length": 131.0, "abort": 0.0}}
    assert "errors" not in m.counters  # no "error" reason in that era: not reported, not 0
    ttft = m.hists["ttft"]
    assert ttft.bounds == (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1)
    assert ttft.cumulative == (0.0, 0.0, 0.0, 13.0, 97.0, 123.0, 138.0, 140.0)
    assert ttft.count == 140.0
    assert set(m.hists) == {"ttft"}
    assert "kv_capacity_tokens" not in m.gauges  # the docs comment the info line out


def test_docs_usage_iteration_tokens_only():
    s = vllm.normalize(fixture_text("vllm-docs-usage-metrics.txt"))
    (m,) = s.models  # the histogram whose family name ends in _total is not a counter
    assert m.model == "unsloth/Llama-3.2-1B-Instruct"
    assert m.gauges == {} and m.counters == {}
    assert set(m.hists) == {"iteration_tokens"}
    it = m.hists["iteration_tokens"]
    assert (it.sum, it.count) == (0.0, 3.0)
    assert it.bounds[:3] == (1.0, 8.0, 16.0) and it.cumulative[:3] == (3.0, 3.0, 3.0)


def test_generated_v0_33_phases_and_iteration_tokens():
    _s, m = one("vllm-generated-v0.33.0-loggers.txt")
    pre, dec, inf = m.hists["prefill"], m.hists["decode"], m.hists["inference"]
    assert (pre.count, pre.sum) == (3.0, 0.093)
    assert (dec.count, dec.sum) == (3.0, 1.3949999999999998)
    assert (inf.count, inf.sum) == (3.0, 1.5)
    assert inf.bounds[:4] == (0.3, 0.5, 0.8, 1.0) and inf.cumulative[:4] == (1.0, 1.0, 3.0, 3.0)
    it = m.hists["iteration_tokens"]  # vllm:iteration_tokens_total_{bucket,sum,count}
    assert (it.count, it.sum) == (43.0, 1151.0)
    assert it.bounds[:3] == (1.0, 8.0, 16.0) and it.bounds[-1] == math.inf
    assert it.cumulative[:3] == (1.0, 41.0, 41.0) and it.cumulative[-1] == 43.0
    assert "spec_draft_tokens" not in m.counters  # no speculative_config: absent, not 0
    assert "spec_accept_rate_gauge" not in m.gauges


def test_generated_spec_decode_counters():
    s, m = one("vllm-generated-spec-decode-v1.txt")
    assert m.model == "Qwen/Qwen3-8B"
    assert m.counters == {"spec_drafts": 512.0, "spec_draft_tokens": 1536.0,
                          "spec_accepted_tokens": 1024.0}
    assert m.gauges == {"running": 4.0, "waiting": 0.0}
    assert s.start_time == 1.7953340009489536e09  # the spec counters' _created


def test_v0_spec_decode_acceptance_gauge():
    text = (  # V0 vllm/engine/metrics.py: the gauge beside the same counters
        "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n"
        'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.71\n'
        "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 700.0\n'
        "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 497.0\n'
    )
    m = vllm.normalize(text).models[0]
    assert m.gauges == {"spec_accept_rate_gauge": 0.71}
    assert m.counters == {"spec_draft_tokens": 700.0, "spec_accepted_tokens": 497.0}


def test_real_cpu_v0_32_capture():
    _s, m = one("vllm-real-cpu-v0.32.0-under-load.txt")
    assert m.model == "tiny-llama"
    assert m.gauges["running"] == 8.0 and m.gauges["waiting"] == 22.0
    assert m.gauges["kv_capacity_tokens"] == 524288.0
    assert m.counters["generation_tokens"] == 3641.0
    assert m.counters["requests"] == 33.0


def test_v0_era_names():
    s, m = one("edge-vllm-v0-era.txt")
    assert m.model == "qwenvl"
    assert m.gauges == {
        "running": 0.0,
        "waiting": 0.0,
        "swapped": 0.0,
        "kv_usage": 0.0,  # gpu_cache_usage_perc
        "prefix_hit_rate_gauge": 0.25,  # gpu_prefix_cache_hit_rate
        "kv_capacity_tokens": 2048.0 * 16,  # num_gpu_blocks * block_size
    }
    assert m.counters == {
        "prompt_tokens": 5120.0,
        "generation_tokens": 800.0,
        "preemptions": 4.0,
        "requests": 10.0,
    }
    assert m.counters_by == {"finished": {"stop": 8.0, "length": 2.0}}
    itl = m.hists["itl"]  # time_per_output_token_seconds
    assert itl.bounds == (0.01, 0.025, 2.5, math.inf)
    assert itl.cumulative == (100.0, 700.0, 790.0, 790.0)
    assert (itl.sum, itl.count) == (12.5, 790.0)
    assert set(m.hists) == {"itl"}
    assert s.start_time is None
    assert m.info["num_gpu_blocks"] == "2048"


def test_v1_0_7_era_gpu_prefix_counters():
    s, m = one("edge-vllm-v1-0.7-era.txt")
    assert s.start_time == 1.74262400557e09
    assert m.gauges == {"running": 0.0, "waiting": 0.0, "kv_usage": 0.0}
    assert m.counters["prefix_queries"] == 120.0
    assert m.counters["prefix_hits"] == 30.0
    assert m.counters["aborted"] == 2.0 and m.counters["requests"] == 9.0


def test_new_prefix_names_win_over_deprecated():
    text = (
        "# TYPE vllm:gpu_prefix_cache_queries_total counter\n"
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 5.0\n'
        "# TYPE vllm:prefix_cache_queries_total counter\n"
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 32.0\n'
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.1\n'
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9\n'
    )
    m = vllm.normalize(text).models[0]
    assert m.counters["prefix_queries"] == 32.0
    assert "prefix_hits" not in m.counters
    assert m.gauges["kv_usage"] == 0.1


def test_data_parallel_ranks():
    s = vllm.normalize(fixture_text("edge-vllm-dp2.txt"))
    assert len(s.models) == 1
    m = s.models[0]
    assert m.gauges == {
        "running": 10.0,
        "waiting": 1.0,
        "kv_usage": 0.75,
        "kv_capacity_tokens": 2000.0,
    }
    assert m.counters == {
        "generation_tokens": 400.0,
        "requests": 9.0,
        "errors": 1.0,
        "rejected": 3.0,  # admission_rejections has no engine label: model level only
    }
    assert m.counters_by == {"finished": {"stop": 8.0, "error": 1.0}}
    assert m.hists["ttft"].cumulative == (3.0, 9.0)
    assert (m.hists["ttft"].sum, m.hists["ttft"].count) == (2.1, 9.0)
    assert [r.rank for r in s.ranks] == ["0", "1"]
    r0, r1 = s.ranks
    assert r0.gauges == {
        "running": 4.0,
        "waiting": 1.0,
        "kv_usage": 0.5,
        "kv_capacity_tokens": 1000.0,
    }
    assert r1.counters == {"generation_tokens": 300.0, "requests": 6.0, "errors": 1.0}
    assert r1.counters_by == {"finished": {"stop": 5.0, "error": 1.0}}
    assert r0.hists["ttft"].cumulative == (1.0, 3.0)
    assert "rejected" not in r0.counters


def test_missing_families_are_absent_not_zero():
    _s, m = one("edge-vllm-missing-family.txt")
    assert m.gauges == {"running": 2.0}
    assert m.counters == {"prompt_tokens": 10.0}
    assert m.hists == {} and m.info == {}
    for key in GAUGE_KEYS:
        if key != "running":
            assert key not in m.gauges


def test_nan_and_inf_values():
    _s, m = one("edge-nan-inf.txt")
    assert "running" not in m.gauges  # NaN = no value
    assert "waiting" not in m.gauges  # +Inf gauge is not a count
    assert m.gauges["kv_usage"] == 0.25
    e2e = m.hists["e2e"]
    assert e2e.bounds == (0.3, 1.0, math.inf)
    assert e2e.cumulative == (0.0, 2.0, 5.0)
    assert (e2e.sum, e2e.count) == (12.0, 5.0)


def test_counter_reset_pair_reads_both_sides_exactly():
    a = vllm.normalize(fixture_text("edge-vllm-counter-reset-a.txt"))
    b = vllm.normalize(fixture_text("edge-vllm-counter-reset-b.txt"))
    assert a.models[0].counters["generation_tokens"] == 50000.0
    assert b.models[0].counters["generation_tokens"] == 120.0
    assert a.models[0].counters["requests"] == 400.0
    assert b.models[0].counters["requests"] == 1.0
    assert (a.start_time, b.start_time) == (1.7e09, 1.7000036e09)


def test_triton_vllm_backend_via_normalize_families():
    fams = parse(fixture_text("triton-vllm_backend-readme.txt"))
    s = vllm.normalize_families(fams, model_labels=("model",))
    assert len(s.models) == 1 and s.ranks == []
    m = s.models[0]
    assert m.model == "vllm_model"
    assert m.gauges == {}
    assert m.counters == {"prompt_tokens": 10.0, "generation_tokens": 16.0}
    assert set(m.hists) == {"ttft", "itl", "e2e", "prompt_len", "gen_len"}
    assert (m.hists["ttft"].count, m.hists["ttft"].sum) == (1.0, 0.03233122825622559)
    assert m.hists["ttft"].bounds == (0.001, math.inf)
    assert m.hists["ttft"].cumulative == (0.0, 1.0)
    assert (m.hists["itl"].count, m.hists["itl"].sum) == (15.0, 0.04501533508300781)
    assert m.hists["itl"].cumulative == (14.0, 15.0)
    assert (m.hists["e2e"].count, m.hists["e2e"].sum) == (1.0, 0.08686184883117676)
    assert (m.hists["prompt_len"].sum, m.hists["gen_len"].sum) == (10.0, 16.0)


@pytest.mark.parametrize("name", ["edge-html-status-200.txt", "edge-truncated-body.txt"])
def test_bad_payloads_raise(name):
    text = fixture_text(name)
    if name.startswith("edge-html"):
        text = text.split("\n", 1)[1]
    with pytest.raises(ParseError):
        vllm.normalize(text)


def test_want_lists_only_vllm_and_process_start():
    assert "process_start_time_seconds" in vllm.WANTED
    # and LMCache's lmcache:* which it serves on vLLM's port (parse/kv_series.py), and a
    # Dynamo worker's dynamo_component_* request series, for its role (parse/dynamo_worker.py)
    assert all(n.startswith(("vllm:", "lmcache:", "dynamo_component_"))
               for n in vllm.WANTED - {"process_start_time_seconds"})


def test_group_hists_reuses_labels_dicts_across_calls_and_keys():
    """``group_hists`` keeps what it makes of a labels dict (group, bucket bound): the same
    dicts seen again with new values, or grouped by another key, give fresh results."""
    inf = math.inf
    lo = {"model_name": "m", "engine": "0", "le": "0.5"}
    top = {"model_name": "m", "engine": "0", "le": "+Inf"}
    lo1 = {"model_name": "m", "engine": "1", "le": "0.5"}
    top1 = {"model_name": "m", "engine": "1", "le": "+Inf"}
    skipped = [{"model_name": "m", "le": "x"}, {"model_name": "m", "le": "NaN"}, {"le": "1"}]
    series = {"model_name": "m", "engine": "0"}

    def fam(v: float) -> Family:
        samples = [Sample("h_bucket", lo, v), Sample("h_bucket", top, v + 1),
                   Sample("h_bucket", lo1, 1.0), Sample("h_bucket", top1, math.nan),
                   *(Sample("h_bucket", d, 7.0) for d in skipped),
                   Sample("h_sum", series, 2.5), Sample("h_count", series, v + 1)]
        return Family("h", "histogram", samples=samples)

    def by_rank(labels):
        m = labels.get("model_name")
        return None if m is None else (m, labels.get("engine"))

    def by_model(labels):
        return ("all", None) if "model_name" in labels else None

    def plain(hists):
        return {k: (h.bounds, h.cumulative, "nan" if math.isnan(h.sum) else h.sum, h.count)
                for k, h in hists.items()}

    for _ in range(2):  # the second round reads the kept results
        for v in (1.0, 3.0):
            assert plain(vllm.group_hists(fam(v), by_rank)) == {
                ("m", "0"): ((0.5, inf), (v, v + 1), 2.5, v + 1),
                ("m", "1"): ((0.5,), (1.0,), "nan", 1.0),  # a NaN bucket is left out
            }
        assert plain(vllm.group_hists(fam(3.0), by_model)) == {
            ("all", None): ((0.5, inf), (4.0, 4.0), 2.5, 4.0),
        }


def _hist_plain(hists):
    return {k: (h.bounds, h.cumulative, "nan" if math.isnan(h.sum) else h.sum, h.count)
            for k, h in hists.items()}


@pytest.mark.parametrize("fixture", sorted(
    p.name for p in (Path(__file__).parent.parent / "fixtures" / "metrics").glob("*.txt")
    if p.name.startswith(("vllm", "sglang", "edge-vllm", "edge-sglang", "lmdeploy"))))
def test_group_hists_layout_path_equals_the_sample_by_sample_path(fixture):
    """The kept layout (same series as last call) gives exactly what grouping every sample
    gives: first call, repeat, new values, a NaN among them, and a series fewer."""
    from llmtop.parse.exposition import parse

    text = (Path(__file__).parent.parent / "fixtures" / "metrics" / fixture).read_text()
    try:
        fams = parse(text)
    except Exception:
        pytest.skip("not parseable")
    keys = (vllm._key_fn(("model_name", "model"), "engine"), lambda labels: ("all", None))
    hist_fams = [f for f in fams.values() if f.type == "histogram"]
    if not hist_fams:
        pytest.skip("no histograms")
    for f in hist_fams:
        for key in keys:
            for scale in (1.0, 1e-3):
                want = _hist_plain(vllm._group_hists(f, key, scale))
                assert _hist_plain(vllm.group_hists(f, key, scale=scale)) == want
                assert _hist_plain(vllm.group_hists(f, key, scale=scale)) == want
                moved = Family(f.name, f.type, f.help,
                               [Sample(s.name, s.labels, s.value * 2 + 1) for s in f.samples])
                assert (_hist_plain(vllm.group_hists(moved, key, scale=scale))
                        == _hist_plain(vllm._group_hists(moved, key, scale)))
                if f.samples:
                    nan = Family(f.name, f.type, f.help, [Sample(f.samples[0].name,
                                 f.samples[0].labels, math.nan), *f.samples[1:]])
                    assert (_hist_plain(vllm.group_hists(nan, key, scale=scale))
                            == _hist_plain(vllm._group_hists(nan, key, scale)))
                    fewer = Family(f.name, f.type, f.help, f.samples[1:])
                    assert (_hist_plain(vllm.group_hists(fewer, key, scale=scale))
                            == _hist_plain(vllm._group_hists(fewer, key, scale)))


def test_group_hists_adds_up_series_of_one_group_even_with_a_kept_layout():
    """Two series in one group (multiprocess ``pid`` labels) are summed, every call."""
    a = {"model_name": "m", "pid": "1", "le": "+Inf"}
    b = {"model_name": "m", "pid": "2", "le": "+Inf"}
    fam = Family("h", "histogram", samples=[Sample("h_bucket", a, 2.0),
                                            Sample("h_bucket", b, 3.0)])
    key = vllm._key_fn(("model_name",), "engine")
    for _ in range(3):
        (h,) = vllm.group_hists(fam, key).values()
        assert h.cumulative == (5.0,) and h.count == 5.0


def test_waiting_by_reason_on_real_vllm_0_32():
    """A real CPU vLLM 0.32 under KV pressure: 4 waiting, all for capacity: 0 deferred is a
    reading (0.0), not absent; without the family there is no key (shown as –)."""
    _s, m = one("vllm-real-cpu-v0.32.0-kv-pressure-b.txt")
    assert m.gauges["waiting"] == 4.0 and m.gauges["waiting_deferred"] == 0.0
    _s, docs = one("vllm-docs-design-metrics.txt")  # no such family: no key at all
    assert "waiting_deferred" not in docs.gauges
