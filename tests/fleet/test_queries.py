"""Fleet mode, pure parts: the PromQL it builds, client-side quantiles, answers -> rows."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from llmtop.fleet.config import parse_time
from llmtop.fleet.queries import (
    MAX_QUERY_CHARS,
    Plan,
    align,
    classify,
    parse_duration,
    parse_match,
    split_union,
)
from llmtop.fleet.rows import build_rows, render, split_groups
from llmtop.history.derive import bucket_quantile
from llmtop.parse.exposition import parse
from llmtop.parse.registry import normalize

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "metrics"


def _plan(**kw) -> Plan:
    names = {"vllm:num_requests_running": "gauge", "vllm:kv_cache_usage_perc": "gauge",
             "vllm:generation_tokens_total": "counter", "vllm:cache_config_info": "info",
             "vllm:time_to_first_token_seconds_bucket": "bucket",
             "vllm:time_to_first_token_seconds_sum": "counter",
             "vllm:time_to_first_token_seconds_count": "counter",
             "sglang:num_running_reqs": "gauge", "DCGM_FI_DEV_GPU_UTIL": "dcgm"}
    args = {"group": ("instance",), "window_s": 60.0,
            "matchers": ['namespace=~"prod-.*"', 'model_name="llama"', 'server=""'],
            "target_matchers": ['namespace=~"prod-.*"'], "names": names,
            "engines": ("sglang", "vllm")} | kw
    return Plan(**args)


def _parts(expr: str) -> list[str]:
    return split_union(expr, limit=1)


def test_a_fixed_set_of_queries_whatever_the_fleet():
    q = _plan().queries()
    assert set(q) == {"gauges", "counters", "buckets", "state", "gpus", "stack"}
    # nothing in a query names an instance: the same text serves 1 or 10,000 instances
    assert not any("10.0." in v or "instance=" in v for v in q.values())


def test_rate_first_then_sum_and_le_in_every_by():
    q = _plan().queries()
    for part in _parts(q["buckets"]):
        assert re.search(r"sum by \([^)]*\ble\b[^)]*\) \(max without \([^)]*\) \(rate\(", part)
    for part in _parts(q["counters"]):
        assert "sum by (" in part and "(rate(" in part
        assert not re.search(r"rate\(\s*sum", part)  # never rate of a sum
    assert "/" not in q["counters"]  # no ratio of raw counters on the server


def test_every_engine_selector_excludes_the_router_and_keeps_the_users_matchers():
    q = _plan().queries()
    sels = re.findall(r"(?:vllm|sglang):[a-z_]+\{([^}]*)\}", " ".join(q.values()))
    assert sels and all('server=""' in s and 'namespace=~"prod-.*"' in s for s in sels)
    # up and process series carry no model label: the model matcher is left out there
    up = re.search(r"up\{([^}]*)\}", q["state"])
    assert up and up.group(1) == 'namespace=~"prod-.*"'


def test_copies_are_counted_once_before_summing():
    q = _plan().queries()
    for role in ("gauges", "counters", "buckets"):
        for part in _parts(q[role]):
            assert "max without (prometheus_replica, replica, tp_rank" in part


def test_group_by_labels_are_kept():
    q = _plan(group=("namespace", "pod")).queries()
    assert all(re.search(r"sum by \(namespace, pod, job, model_name", p)
               for p in _parts(q["gauges"]) if "sum by" in p)


def test_long_unions_are_split_at_part_boundaries():
    names = {f"vllm:metric_{i}_total": "counter" for i in range(300)}
    q = _plan(names=names).queries()
    chunks = [v for k, v in q.items() if k.startswith("counters")]
    assert len(chunks) > 1 and all(len(c) <= MAX_QUERY_CHARS for c in chunks)
    tags = re.findall(r'"llmtop_name", "([^"]+)"', " ".join(chunks))
    assert sorted(tags) == sorted(names)


def test_classify():
    assert classify("vllm:x_bucket", set(), set()) == "bucket"
    assert classify("vllm:x_total", set(), set()) == "counter"
    assert classify("vllm:x_sum", set(), set()) == "counter"
    assert classify("vllm:x_created", set(), set()) == "skip"
    assert classify("vllm:cache_config_info", set(), set()) == "info"
    assert classify("vllm:num_requests_running", set(), set()) == "gauge"
    assert classify("nv_inference_request_success", set(), set()) == "counter"
    assert classify("nv_inference_pending_request_count", set(), set()) == "gauge"
    assert classify("tgi_request_count", {"tgi_request_count"}, set()) == "counter"


def test_parse_match():
    ms = parse_match('{namespace=~"prod-.*", model_name="a\\"b"}')
    assert [(m.label, m.op, m.value) for m in ms] == [("namespace", "=~", "prod-.*"),
                                                     ("model_name", "=", 'a"b')]
    assert ms[1].text() == 'model_name="a\\"b"'
    assert parse_match("") == [] and parse_match('namespace=~"("') is not None
    assert parse_match("not a matcher") is None


def test_durations_times_and_alignment():
    assert parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5
    assert parse_duration("nope") is None
    assert parse_time("1700000000.25") == 1700000000.25
    want = datetime(2026, 11, 25, 3, 12, tzinfo=timezone.utc).timestamp()
    assert parse_time("2026-11-25T03:12:00Z") == want == parse_time("2026-11-25T03:12:00+00:00")
    assert parse_time("-2h", now=10_000.0) == 10_000.0 - 7200
    assert align(1_000_007.9, 15) == 1_000_005.0 and align(12.5, 0.5) == 12.0


# ----------------------------------------------------------------- quantiles, as PromQL


@pytest.mark.parametrize(("q", "value", "flag"), [
    (0.75, 0.15, None),       # interpolated inside (0.1, 0.2]
    (0.5, 0.1, "below"),      # lowest bucket: PromQL interpolates from 0 (0.08), llmtop "<0.1"
    (0.99, 0.2, "above"),     # +Inf bucket: PromQL returns the last finite bound
])
def test_bucket_quantile_as_histogram_quantile(q, value, flag):
    v, f = bucket_quantile(q, (0.1, 0.2, math.inf), (5.0, 7.0, 8.0))
    assert math.isclose(v, value) and f == flag


def test_quantile_edge_cases_are_none():
    assert bucket_quantile(0.5, (0.1, 0.2, math.inf), (0.0, 0.0, 0.0)) == (None, None)
    assert bucket_quantile(0.5, (0.1, 0.2), (1.0, 2.0)) == (None, None)  # no +Inf
    assert bucket_quantile(0.5, (math.inf,), (3.0,)) == (None, None)  # < 2 buckets
    # non-monotonic bucket rates are made monotonic, as PromQL does
    v, _ = bucket_quantile(0.75, (0.1, 0.2, 0.4, math.inf), (5.0, 4.0, 7.0, 8.0))
    assert math.isclose(v, 0.2 + 0.2 * (1.0 / 2.0))


def _answer(series: list[tuple[str, dict[str, str], str]]) -> list[dict]:
    return [{"metric": {"llmtop_name": n, **labels}, "value": [1.0, v]} for n, labels, v in series]


def _ttft(instance: str, les: list[tuple[str, str]], model: str = "m"):
    base = {"instance": instance, "job": "vllm", "model_name": model}
    out = [("vllm:time_to_first_token_seconds_bucket", base | {"le": le}, v) for le, v in les]
    total = les[-1][1]
    out += [("vllm:time_to_first_token_seconds_count", base, total),
            ("vllm:time_to_first_token_seconds_sum", base, "0.5"),
            ("vllm:num_requests_running", base, "4")]
    return out


def test_prometheus_3_float_le_and_rates_give_the_same_rows():
    old = _ttft("a:1", [("0.1", "1"), ("1", "3"), ("+Inf", "4")])
    new = _ttft("a:1", [("0.1", "1"), ("1.0", "3"), ("+Inf", "4")])
    rows = [build_rows(split_groups([_answer(s)], ("instance",)), ("instance",), 60.0)[0][0]
            for s in (old, new)]
    assert rows[0].ttft_s == rows[1].ttft_s
    assert math.isclose(rows[0].ttft_s.p50, 0.1 + 0.9 * (1.0 / 2.0))
    assert rows[0].ttft_s.count == 4 * 60  # bucket rate x window = observations in the window
    assert math.isclose(rows[0].ttft_s.mean, 0.5 / 4)


def test_totals_take_quantiles_of_summed_bucket_rates_not_mean_of_quantiles():
    from llmtop.fleet.rows import model_totals

    a = _ttft("a:1", [("0.1", "10"), ("1", "10"), ("+Inf", "10")])  # all fast
    b = _ttft("b:1", [("0.1", "0"), ("1", "2"), ("+Inf", "2")])     # few, slow
    _rows, samples = build_rows(split_groups([_answer(a + b)], ("instance",)), ("instance",), 60)
    (total,) = model_totals(samples.values(), 60.0)
    v, _ = bucket_quantile(0.95, (0.1, 1.0, math.inf), (10.0, 12.0, 12.0))
    assert math.isclose(total.ttft_s.p95, v)
    assert total.running == 8.0


def test_nan_answers_are_missing_never_zero():
    s = [("vllm:num_requests_running", {"instance": "a:1", "model_name": "m"}, "3"),
         ("vllm:num_requests_waiting", {"instance": "a:1", "model_name": "m"}, "NaN")]
    (row,), _ = build_rows(split_groups([_answer(s)], ("instance",)), ("instance",), 60)
    assert row.running == 3.0 and row.waiting is None and row.kv_cache_usage is None


def test_finished_reasons_errors_and_prefix_rate_from_rates():
    base = {"instance": "a:1", "job": "vllm", "model_name": "m"}
    s = [("vllm:request_success_total", base | {"finished_reason": "stop"}, "2"),
         ("vllm:request_success_total", base | {"finished_reason": "error"}, "0.5"),
         ("vllm:prefix_cache_queries_total", base, "0"),
         ("vllm:prefix_cache_hits_total", base, "0")]
    (row,), _ = build_rows(split_groups([_answer(s)], ("instance",)), ("instance",), 30)
    assert row.requests_per_s == 2.5 and row.errors_per_s == 0.5
    assert row.finished == {"stop": 60.0, "error": 15.0}
    assert row.prefix_hit_rate is None  # no queries in the window: unknown, not 0


def test_rank_rows_and_labels():
    base = {"instance": "a:1", "job": "vllm", "model_name": "m"}
    s = [("vllm:num_requests_running", base | {"engine": "0"}, "1"),
         ("vllm:num_requests_running", base | {"engine": "1"}, "2")]
    (row,), _ = build_rows(split_groups([_answer(s)], ("instance",)), ("instance",), 30)
    assert row.running == 3 and [r.rank for r in row.ranks] == ["0", "1"]
    assert row.labels == {"instance": "a:1", "job": "vllm"}
    assert row.to_json()["labels"] == {"instance": "a:1", "job": "vllm"}
    assert row.target == "a:1" and row.key == "a:1|m"


@pytest.mark.parametrize(("name", "engine"), [
    ("vllm-generated-v0.33.0-loggers.txt", "vllm"),
    ("vllm-real-cpu-v0.32.0-under-load.txt", "vllm"),
    ("edge-vllm-dp2.txt", "vllm"),
    ("edge-vllm-v0-era.txt", "vllm"),
    ("sglang-generated-v0.5.23-metrics_collector.txt", "sglang"),
    ("edge-sglang-dp-pid.txt", "sglang"),
    ("triton-trtllm_backend-SYNTHETIC-from-custom_metrics_reporter-cc.txt", "triton"),
    ("trtllm-prometheus-SYNTHETIC-from-collector-py.txt", "trtllm"),
    ("tgi-SYNTHETIC-from-server-rs.txt", "tgi"),
    ("llamacpp-SYNTHETIC-from-server-context-cpp.txt", "llamacpp"),
    ("lmdeploy-SYNTHETIC-from-loggers-py.txt", "lmdeploy"),
])
def test_rendered_answers_read_like_the_engines_own_text(name, engine):
    """What the adapters make of answer series equals what they make of the real text."""
    text = (FIX / name).read_text()
    series: dict[str, list] = {}
    for fam in parse(text).values():
        for s in fam.samples:
            series.setdefault(s.name, []).append((dict(s.labels), s.value))
    a, b = normalize(engine, text), normalize(engine, render(series))
    if name == "edge-sglang-dp-pid.txt":
        # a family with HELP/TYPE but no sample (cached_tokens before the first hit) reads as
        # 0 hits from the text; a server has no such series: unknown, shown "–"
        for m in (*a.models, *a.ranks):
            m.counters.pop("prefix_hits", None)
            m.counters.pop("prefix_queries", None)
    assert [m.model for m in a.models] == [m.model for m in b.models]
    assert a.models == b.models and a.ranks == b.ranks
    if engine in ("vllm", "sglang", "lmdeploy"):  # the no-text path gives the same sample
        import importlib

        from llmtop.fleet.rows import families_of

        c = importlib.import_module(f"llmtop.parse.{engine}").normalize_families(
            families_of(series))
        assert c.models == b.models and c.ranks == b.ranks
        # and the fleet's path: histograms built straight from the series, the rest as
        # families: the same models and ranks (histograms included) as the engine's text
        from llmtop.fleet.rows import Group, group_samples

        (d,) = group_samples(Group(("x",), {}, series), ())
        assert d.models == b.models and d.ranks == b.ranks


def test_docs_list_every_query_as_the_code_sends_it():
    from llmtop.fleet.queries import describe_queries

    doc = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
    block = doc.split("<!-- queries:begin -->\n```promql\n", 1)[1]
    block = block.split("```\n<!-- queries:end", 1)[0]
    assert block == describe_queries()


def test_a_group_with_two_engines_gives_a_row_per_engine():
    s = [("vllm:num_requests_running", {"job": "engines", "model_name": "m"}, "3"),
         ("sglang:num_running_reqs", {"job": "engines", "model_name": "m"}, "5")]
    rows, _ = build_rows(split_groups([_answer(s)], ("job",)), ("job",), 30)
    assert {(r.engine, r.running) for r in rows} == {("vllm", 3.0), ("sglang", 5.0)}
    assert len({r.key for r in rows}) == 2 and all(r.target == "engines" for r in rows)


def test_metadata_types_win_over_names():
    assert classify("nv_inference_request_summary_us", {"nv_inference_request_summary_us":
                                                        "summary"}) == "gauge"
    assert classify("nv_inference_count", {"nv_inference_count": "counter"}) == "counter"
    assert classify("tgi_queue_size", {"tgi_queue_size": "gauge"}) == "gauge"
    assert classify("my_counter", {"my_counter": "counter"}) == "counter"
    assert classify("vllm:cache_config_info", {"vllm:cache_config_info": "gauge"}) == "info"


def test_a_total_over_two_engines_names_no_engine():
    from llmtop.fleet.rows import model_totals

    a = _ttft("a:1", [("0.1", "1"), ("1", "3"), ("+Inf", "4")])
    s = [("sglang:num_running_reqs", {"instance": "b:1", "job": "sglang", "model_name": "m"},
          "5")]
    _rows, samples = build_rows(split_groups([_answer(a + s)], ("instance",)), ("instance",), 60)
    (total,) = model_totals(samples.values(), 60.0)
    assert total.engine is None and total.running == 9.0
