"""SGLang adapter: every normalized field on every fixture, exact values read from the text."""

from __future__ import annotations

import math

from llmtop.parse import sglang
from tests.conftest import fixture_text


def test_generated_v0_5_23():
    s = sglang.normalize(fixture_text("sglang-generated-v0.5.23-metrics_collector.txt"))
    assert s.engine == "sglang" and s.ranks == [] and s.start_time is None and s.version is None
    (m,) = s.models
    assert m.model == "Qwen/Qwen3-0.6B"
    assert m.gauges == {
        "running": 3.0,
        "waiting": 1.0,
        "kv_usage": 0.0054,
        "kv_capacity_tokens": 446640.0,
        "prefix_hit_rate_gauge": 0.42,  # cache_hit_rate: fallback gauge only
    }
    assert m.counters == {
        "prompt_tokens": 2048.0,  # realtime prefill_compute + prefill_cache
        "generation_tokens": 123.0 + 2.0,  # realtime decode + one per finished request
        "requests": 2.0,
        "aborted": 1.0,
        "preemptions": 1.0,  # num_retracted_requests_total
        "prefix_queries": 2048.0,  # realtime prefill_compute + prefill_cache
        "prefix_hits": 512.0,  # realtime prefill_cache
    }
    assert "max_running" not in m.gauges
    assert set(m.hists) == {"ttft", "itl", "tpot", "e2e", "queue", "prompt_len", "gen_len"}
    assert (m.hists["ttft"].sum, m.hists["ttft"].count) == (0.714, 3.0)
    assert m.hists["ttft"].bounds[:3] == (0.1, 0.2, 0.4)
    assert m.hists["ttft"].bounds[-1] == math.inf
    assert (m.hists["itl"].sum, m.hists["itl"].count) == (0.048, 4.0)
    assert m.hists["tpot"].count == 2.0
    assert math.isclose(m.hists["tpot"].sum, 0.0143 + 0.0151)
    assert m.hists["e2e"].count == 2.0 and math.isclose(m.hists["e2e"].sum, 0.62 + 1.41)
    assert (m.hists["queue"].sum, m.hists["queue"].count) == (0.016, 2.0)
    assert m.hists["queue"].bounds[:3] == (0.0, 0.001, 0.005)
    assert (m.hists["prompt_len"].sum, m.hists["prompt_len"].count) == (2048.0, 2.0)
    assert (m.hists["gen_len"].sum, m.hists["gen_len"].count) == (123.0, 2.0)


def test_docs_v0_4_sample():
    s = sglang.normalize(
        fixture_text("sglang-docs-production_metrics.txt"), identity={"version": "0.4.0"}
    )
    assert s.version == "0.4.0"
    (m,) = s.models
    assert m.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert m.gauges == {
        "running": 162.0,
        "waiting": 2826.0,
        "kv_usage": 0.28,
        "prefix_hit_rate_gauge": 0.007507552643049313,
    }
    # no cached_tokens in that era: no prefix counters (missing, not 0)
    assert m.counters == {"prompt_tokens": 8.128902e06, "generation_tokens": 7.557572e06}
    assert set(m.hists) == {"ttft", "tpot", "e2e"}  # old time_per_output_token -> tpot, no itl
    assert (m.hists["ttft"].sum, m.hists["ttft"].count) == (2.3518979474117756e06, 11008.0)
    assert (m.hists["tpot"].sum, m.hists["tpot"].count) == (866964.5791549598, 7.400757e06)
    assert m.hists["tpot"].cumulative[:3] == (1.0, 73.0, 382.0)
    assert (m.hists["e2e"].sum, m.hists["e2e"].count) == (3.116093850019932e06, 11228.0)


def test_v0_3_name_label():
    (m,) = sglang.normalize(fixture_text("edge-sglang-v0.3-name-label.txt")).models
    assert m.model == "/models/Llama-3.2-3B/"
    assert m.gauges == {
        "running": 12.0,
        "waiting": 5.0,
        "kv_capacity_tokens": 500000.0,
        "max_running": 4096.0,
    }
    assert m.counters == {"prompt_tokens": 70000.0}
    assert m.hists["ttft"].bounds == (5.0, math.inf)
    assert m.hists["ttft"].cumulative == (1029.0, 1029.0)
    assert (m.hists["ttft"].sum, m.hists["ttft"].count) == (300.5, 1029.0)


def test_dp_ranks_pid_nan_and_tp_duplicates():
    s = sglang.normalize(fixture_text("edge-sglang-dp-pid.txt"))
    (m,) = s.models
    assert m.gauges == {"running": 8.0, "waiting": 2.0, "kv_usage": 0.6}  # tp_rank 1 ignored
    assert m.counters == {
        "preemptions": 7.0,  # num_retractions summed over pid
        "prompt_tokens": 150.0,
        "prefix_queries": 150.0,
        "prefix_hits": 0.0,  # cached_tokens family present, no series yet
    }
    assert [r.rank for r in s.ranks] == ["0", "1"]
    r0, r1 = s.ranks
    assert r0.gauges == {"running": 3.0, "kv_usage": 0.2}  # waiting NaN: not reported
    assert r1.gauges == {"running": 5.0, "waiting": 2.0, "kv_usage": 0.6}
    assert r0.counters == {"preemptions": 3.0} and r1.counters == {"preemptions": 4.0}


def test_spec_accept_rate_gauge_is_absent_while_speculation_is_off():
    # the v0.5.23 text: spec_accept_rate 0.0 with spec_num_steps/spec_num_draft_tokens 0.0
    (m,) = sglang.normalize(fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")).models
    assert "spec_accept_rate_gauge" not in m.gauges
    assert not any(k.startswith("spec_") for k in m.counters)  # SGLang has no spec counters


def test_spec_accept_rate_gauge_while_speculation_is_on():
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    on = {"sglang:spec_accept_rate{": "0.463", "sglang:spec_num_steps{": "4.0",
          "sglang:spec_num_draft_tokens{": "5.0", "sglang:spec_accept_length{": "2.85"}
    lines = []
    for line in text.splitlines():
        for prefix, value in on.items():
            if line.startswith(prefix):
                line = line.rsplit(" ", 1)[0] + " " + value
        lines.append(line)
    (m,) = sglang.normalize("\n".join(lines) + "\n").models
    assert m.gauges["spec_accept_rate_gauge"] == 0.463


def test_spec_accept_rate_gauge_in_builds_without_spec_num_steps():
    base = 'engine_type="unified",model_name="m",tp_rank="0"'
    text = (
        "# TYPE sglang:spec_accept_rate gauge\n"
        f"sglang:spec_accept_rate{{{base}}} 0.5\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        f"sglang:spec_accept_length{{{base}}} 0.0\n"
    )
    off = sglang.normalize(text).models  # length 0: speculation off, the 0.5 is not used
    assert all("spec_accept_rate_gauge" not in m.gauges for m in off)
    (m,) = sglang.normalize(text.replace("} 0.0", "} 2.5")).models
    assert m.gauges == {"spec_accept_rate_gauge": 0.5}


def test_spec_accept_rate_gauge_of_dp_ranks_is_not_summed():
    text = "".join(
        "# TYPE sglang:spec_accept_rate gauge\n" * (r == 0)
        + f'sglang:spec_accept_rate{{dp_rank="{r}",model_name="m",tp_rank="0"}} {v}\n'
        for r, v in ((0, 0.6), (1, 0.7)))
    text += "".join(
        "# TYPE sglang:spec_num_steps gauge\n" * (r == 0)
        + f'sglang:spec_num_steps{{dp_rank="{r}",model_name="m",tp_rank="0"}} 3.0\n'
        for r in (0, 1))
    s = sglang.normalize(text)
    assert [r.gauges["spec_accept_rate_gauge"] for r in s.ranks] == [0.6, 0.7]
    assert s.models[0].gauges["spec_accept_rate_gauge"] == 0.7  # max, never 1.3


def test_prefill_time_from_the_prefill_forward_stage():
    (m,) = sglang.normalize(fixture_text("sglang-generated-per-stage-latency.txt")).models
    assert set(m.hists) == {"prefill"}  # request_process / chunked_prefill are not read
    pre = m.hists["prefill"]
    assert (pre.count, pre.sum) == (4.0, 0.29300000000000004)
    assert pre.bounds[0] == 0.001 and len(pre.bounds) == 31 and pre.bounds[-1] == math.inf
    assert pre.bounds[7] == 0.029282294342350097
    assert pre.cumulative[6:10] == (0.0, 1.0, 2.0, 3.0) and pre.cumulative[-1] == 4.0


def test_no_per_stage_family_means_no_prefill():
    (m,) = sglang.normalize(fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")).models
    assert "prefill" not in m.hists


# /server_info: server args + "internal_states" + version (METRICS.md §identity; SGLang 0.5.x
# answers the ServerArgs fields flat, max_running_requests among them)
_SERVER_INFO = {
    "model_path": "meta-llama/Llama-3.1-8B-Instruct", "served_model_name": "llama",
    "tp_size": 1, "dp_size": 1, "pp_size": 1, "max_running_requests": 48,
    "max_total_num_tokens": 413286, "context_length": 131072, "page_size": 1,
    "chunked_prefill_size": 8192, "enable_metrics": True, "version": "0.5.23",
    "internal_states": [{"last_gen_throughput": 812.4}],
}


def _sglang_identity(info: dict) -> dict:
    """What ``scrape_identity.identify`` keeps of a ``/server_info`` answer."""
    from llmtop.sources.scrape_identity import _SGLANG_KEYS

    sub = {k: info[k] for k in _SGLANG_KEYS if isinstance(info.get(k), (str, int, float, bool))}
    return {"host": "127.0.0.1", "sglang": sub, "version": sub.get("version")}


def test_max_running_from_server_info():
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    assert "max_running" not in sglang.normalize(text).models[0].gauges  # not in /metrics
    (m,) = sglang.normalize(text, identity=_sglang_identity(_SERVER_INFO)).models
    assert m.gauges["max_running"] == 48.0


def test_max_running_from_server_info_only_when_certain():
    text = fixture_text("sglang-generated-v0.5.23-metrics_collector.txt")
    for bad in ({"max_running_requests": None}, {"max_running_requests": 0},
                {"dp_size": 2}, {"max_running_requests": "48"}):
        (m,) = sglang.normalize(text, identity=_sglang_identity({**_SERVER_INFO, **bad})).models
        assert "max_running" not in m.gauges, bad
    # an old build's own gauge wins
    (m,) = sglang.normalize(fixture_text("edge-sglang-v0.3-name-label.txt"),
                            identity=_sglang_identity(_SERVER_INFO)).models
    assert m.gauges["max_running"] == 4096.0


def test_real_cpu_v0_5_23_under_load():
    """A real server's scrape (scripts/real_sglang): tokens as the scheduler counts them each
    step, not the per-finished-request counters; a retraction counter not yet created is 0."""
    text = fixture_text("sglang-real-cpu-v0.5.23-under-load.txt")
    (m,) = sglang.normalize(text).models
    assert m.model == "tiny-llama"
    assert m.gauges == {"running": 4.0, "waiting": 4.0, "kv_usage": 0.06,
                        "kv_capacity_tokens": 8192.0,
                        "prefix_hit_rate_gauge": 0.9961139896373057}
    assert "sglang:num_retracted_requests_total" not in text
    assert m.counters == {
        # realtime decode + finished requests' first tokens (generation_tokens_total: 3902,
        # short of the tokens of the requests still running)
        "generation_tokens": 3981.0 + 49.0,
        "prompt_tokens": 2410.0 + 11994.0,  # realtime prefill_compute + prefill_cache
        "prefix_queries": 2410.0 + 11994.0,
        "prefix_hits": 11994.0,  # realtime prefill_cache (cached_tokens_total: 10974)
        "requests": 49.0,
        "aborted": 18.0,
        "preemptions": 0.0,  # no num_retracted_requests_total yet; num_retracted_reqs 0
    }
    assert (m.hists["ttft"].count, m.hists["queue"].count, m.hists["prefill"].count) == (
        53.0, 54.0, 54.0)
    assert m.hists["itl"].count == 3974.0 and m.hists["e2e"].count == 49.0


def test_real_cpu_v0_5_23_full_pool():
    """A real server whose 980-token pool is full (4 prompts of ~240 tokens) with 6 waiting:
    token usage is read as KV usage, and the running gauge reads 0 while 958 tokens are in
    use (it is set at each prefill batch before that batch joins the running one)."""
    (m,) = sglang.normalize(fixture_text("sglang-real-cpu-v0.5.23-full-pool.txt")).models
    g = m.gauges
    assert (g["kv_usage"], g["kv_capacity_tokens"], g["waiting"], g["running"]) == (
        0.98, 980.0, 6.0, 0.0)
    assert m.counters["preemptions"] == 0.0  # no retraction: num_retracted_reqs 0


def test_finished_request_counters_only_without_realtime():
    """Builds without ``realtime_tokens`` keep the per-request counters (and no invented 0
    for preemptions without the ``num_retracted_reqs`` gauge)."""
    text = "\n".join(
        ln for ln in fixture_text("sglang-real-cpu-v0.5.23-under-load.txt").splitlines()
        if "realtime_tokens" not in ln and "num_retracted_reqs" not in ln)
    (m,) = sglang.normalize(text).models
    assert m.counters["generation_tokens"] == 3902.0 and m.counters["prompt_tokens"] == 13379.0
    assert m.counters["prefix_hits"] == 10974.0
    assert "preemptions" not in m.counters
