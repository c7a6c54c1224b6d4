"""Buckets asked only below their count (``Plan.filtered``) and filled back on the client
from the layout (``hists.direct_hists``, ``hists.fill_series``): the same rows as the whole
answer, on histograms of every shape, and the cases where the filter must not be used."""

from __future__ import annotations

import math

import pytest

from llmtop.fleet.queries import Layouts, Plan, layout_query, read_layouts, split_union
from llmtop.fleet.record import layouts_of
from llmtop.fleet.rows import build_rows, split_groups

TTFT = "vllm:time_to_first_token_seconds"
LAYOUT = (0.1, 0.25, 0.5, 1.0, 2.5, math.inf)
LE = ("0.1", "0.25", "0.5", "1.0", "2.5", "+Inf")


def _sum_of(cum: list[float], layout: tuple[float, ...] = LAYOUT) -> float:
    """A ``_sum`` rate that fits the buckets: each bucket's observations at its middle."""
    total, lo, prev = 0.0, 0.0, 0.0
    for le, c in zip(layout, cum, strict=True):
        mid = 2 * lo if le == math.inf else (lo + le) / 2
        total += (c - prev) * mid
        lo, prev = (lo if le == math.inf else le), c
    return total


def _hist(instance: str, cum: list[float], *, model: str = "m", extra: dict | None = None,
          le: tuple[str, ...] = LE, mean: float | None = None
          ) -> list[tuple[str, dict[str, str], float]]:
    """One vLLM TTFT histogram's bucket rates, ``_count`` and ``_sum``, plus a gauge."""
    base = {"instance": instance, "job": "vllm", "model_name": model} | (extra or {})
    total = mean * cum[-1] if mean is not None else _sum_of(cum)
    out = [(f"{TTFT}_bucket", base | {"le": x}, v) for x, v in zip(le, cum, strict=True)]
    out += [(f"{TTFT}_count", dict(base), cum[-1]), (f"{TTFT}_sum", dict(base), total),
            ("vllm:num_requests_running", dict(base), 1.0)]
    return out


def _answer(series) -> list[dict]:
    return [{"metric": {"llmtop_name": n, **labels}, "value": [1.0, repr(v)]}
            for n, labels, v in series]


def _filtered(series, zero: bool = False) -> list[tuple[str, dict[str, str], float]]:
    """What the server sends for ``bucket < ignoring (le) group_left () count`` (``zero``:
    for ``(bucket > 0) < ...``, the zero buckets left out too)."""
    counts = {tuple(sorted(labels.items())): v for n, labels, v in series
              if n.endswith("_count")}
    out = []
    for n, labels, v in series:
        if n.endswith("_bucket"):
            c = counts[tuple(sorted((k, x) for k, x in labels.items() if k != "le"))]
            if not v < c or (zero and not v > 0):
                continue
        out.append((n, labels, v))
    return out


def _rows(series, layouts: dict | None = None):
    lay = Layouts(layouts or {})
    rows, _ = build_rows(split_groups([_answer(series)], ("instance",)), ("instance",),
                         60.0, lay)
    return {r.key: r for r in rows}, lay


SHAPES = [
    [0.0, 0.0, 1.0, 3.0, 4.0, 4.0],   # a spread: zeros, a middle, saturated tops
    [0.0, 0.0, 0.0, 2.0, 2.0, 2.0],   # every observation in one bucket (a step)
    [5.0, 5.0, 5.0, 5.0, 5.0, 5.0],   # all in the lowest bucket
    [0.0, 0.0, 0.0, 0.0, 0.0, 3.0],   # all above the last finite bound
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],   # idle: no observation in the window
    [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],   # nothing saturated before +Inf
]


@pytest.mark.parametrize("zero", [False, True], ids=["below-count", "zeros-too"])
@pytest.mark.parametrize("cum", SHAPES)
def test_filled_buckets_give_the_rows_of_the_whole_answer(cum, zero):
    series = _hist("a:1", cum) + _hist("b:1", [0.0, 1.0, 2.0, 2.0, 2.0, 2.0], model="n")
    whole, _ = _rows(series)
    part, lay = _rows(_filtered(series, zero), {f"{TTFT}_bucket": LAYOUT})
    assert len(_filtered(series, zero)) < len(series)  # the filter dropped something
    assert whole.keys() == part.keys() and not lay.stale
    for key, row in whole.items():
        assert part[key].ttft_s == row.ttft_s, (key, cum)


def test_without_the_layout_a_filtered_answer_would_be_wrong():
    """The fill is what makes it right: the filtered answer read as a whole one puts p99 in
    the wrong bucket (this is the failure the layout prevents)."""
    series = _hist("a:1", [0.0, 0.0, 1.0, 3.0, 4.0, 4.0])
    whole, _ = _rows(series)
    raw, _ = _rows(_filtered(series))
    key = next(iter(whole))
    assert raw[key].ttft_s != whole[key].ttft_s


@pytest.mark.parametrize("zero", [False, True], ids=["below-count", "zeros-too"])
@pytest.mark.parametrize("second", [[0.0, 0.0, 0.0, 3.0, 6.0, 6.0], [0.0, 0.0, 0.0, 6.0, 6.0, 6.0]])
def test_two_series_under_one_key_are_filled_each_then_summed(zero, second):
    """Two jobs scrape one instance: the rows sum both; each is filled with its own count
    (and, with nothing sent, its own mean)."""
    a = _hist("a:1", [0.0, 1.0, 2.0, 2.0, 2.0, 2.0])
    b = _hist("a:1", second, extra={"job": "vllm-b"})
    series = a + b
    whole, _ = _rows(series)
    part, _ = _rows(_filtered(series, zero), {f"{TTFT}_bucket": LAYOUT})
    key = next(iter(whole))
    assert whole[key].ttft_s is not None and part[key].ttft_s == whole[key].ttft_s


@pytest.mark.parametrize("cum", [[0.0, 0.0, 0.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0, 0.0, 2.0]])
def test_one_bucket_is_found_by_the_mean_even_on_its_bound(cum):
    """Nothing sent (every observation in one bucket): the mean names the bucket, also when
    every observation sits on the bucket's bound (token counts do), not the bucket above."""
    i = next(j for j, v in enumerate(cum) if v)
    mean = LAYOUT[i] if LAYOUT[i] != math.inf else 7.0
    series = _hist("a:1", cum, mean=mean)
    assert [n for n, *_ in _filtered(series, True) if n.endswith("_bucket")] == []
    whole, _ = _rows(series)
    part, _ = _rows(_filtered(series, True), {f"{TTFT}_bucket": LAYOUT})
    key = next(iter(whole))
    assert whole[key].ttft_s.p50 is not None and part[key].ttft_s == whole[key].ttft_s


@pytest.mark.parametrize("direct", [True, False], ids=["vllm", "trtllm-text"])
def test_no_bucket_sent_and_no_sum_gives_no_quantile_never_a_guess(direct):
    """Without ``_sum`` the bucket holding every observation is unknown: mean and quantiles
    are ``–`` (the count stays), never the lowest bucket's."""
    name = TTFT if direct else "trtllm_time_to_first_token_seconds"
    base = {"instance": "a:1", "job": "j", "model_name": "m"}
    if not direct:
        base |= {"engine_type": "undefined"}
    series = [(f"{name}_count", dict(base), 2.0),
              ("vllm:num_requests_running" if direct else "trtllm_num_requests_running",
               dict(base), 1.0)]
    part, lay = _rows(series, {f"{name}_bucket": LAYOUT})
    row = next(iter(part.values()))
    assert row.ttft_s is None or row.ttft_s.p50 is None
    assert not lay.stale


def test_a_bound_the_layout_lacks_gives_the_mean_only_and_asks_again():
    series = _hist("a:1", [0.0, 1.0, 3.0, 4.0, 4.0, 4.0],
                   le=("0.1", "0.3", "0.5", "1.0", "2.5", "+Inf"), mean=0.3)  # 0.3: newer
    part, lay = _rows(_filtered(series), {f"{TTFT}_bucket": LAYOUT})
    row = next(iter(part.values()))
    assert lay.stale == {f"{TTFT}_bucket"}
    assert row.ttft_s is not None and row.ttft_s.p50 is None  # no quantile, never a wrong one
    assert row.ttft_s.mean == pytest.approx(0.3)


@pytest.mark.parametrize("zero", [False, True], ids=["below-count", "zeros-too"])
@pytest.mark.parametrize("cum", [[0.0, 2.0, 5.0, 6.0, 6.0, 6.0], [0.0, 0.0, 6.0, 6.0, 6.0, 6.0]])
def test_text_adapters_get_the_buckets_back_too(zero, cum):
    """TRT-LLM (read through exposition text) with its buckets filtered."""
    name = "trtllm_time_to_first_token_seconds"
    base = {"instance": "t:1", "job": "trt", "model_name": "undefined",
            "engine_type": "undefined"}
    series = [(f"{name}_bucket", base | {"le": x}, v) for x, v in zip(LE, cum, strict=True)]
    series += [(f"{name}_count", dict(base), 6.0), (f"{name}_sum", dict(base), _sum_of(cum)),
               ("trtllm_num_requests_running", dict(base), 1.0)]
    whole, _ = _rows(series)
    part, lay = _rows(_filtered(series, zero), {f"{name}_bucket": LAYOUT})
    key = next(iter(whole))
    assert whole[key].ttft_s is not None and whole[key].ttft_s.p50 is not None
    assert part[key].ttft_s == whole[key].ttft_s and not lay.stale


def test_read_layouts_keeps_uniform_names_only():
    def item(name, le, n):
        return {"metric": {"__name__": name, "le": le}, "value": [1.0, str(n)]}

    ans = [item("a_bucket", x, 4) for x in ("0.1", "1", "+Inf")]
    ans += [item("a_bucket", "1.0", 0)]  # never a count of 0, ignored
    ans += [item("b_bucket", "0.1", 2), item("b_bucket", "0.2", 1), item("b_bucket", "+Inf", 3)]
    ans += [item("c_bucket", "1", 1), item("c_bucket", "1.0", 1), item("c_bucket", "+Inf", 2)]
    ans += [item("d_bucket", "1", 2)]  # no +Inf: not a usable histogram
    got = read_layouts(ans)
    assert got == {"a_bucket": (0.1, 1.0, math.inf),
                   "c_bucket": (1.0, math.inf)}  # "1" and "1.0" (Prometheus 3) are one bound
    assert layout_query(["b_bucket", "a_bucket"], ['server=""']) == \
        'count by (__name__, le) ({__name__=~"a_bucket|b_bucket",server=""})'


def _plan(**kw) -> Plan:
    names = {f"{TTFT}_bucket": "bucket", f"{TTFT}_count": "counter", f"{TTFT}_sum": "counter",
             "vllm:e2e_request_latency_seconds_bucket": "bucket"}
    return Plan(**({"group": ("instance",), "window_s": 60.0, "matchers": ['server=""'],
                    "target_matchers": [], "names": names} | kw))


def test_the_filter_needs_a_layout_and_a_count_from_the_same_source():
    lay = {f"{TTFT}_bucket": LAYOUT, "vllm:e2e_request_latency_seconds_bucket": LAYOUT}
    p = _plan(layouts=lay)
    assert p.filtered(f"{TTFT}_bucket")
    assert not p.filtered("vllm:e2e_request_latency_seconds_bucket")  # no _count present
    assert not _plan().filtered(f"{TTFT}_bucket")  # no layout
    rule = {f"{TTFT}_bucket": "llmtop:x_bucket:rate1m"}  # bucket from a rule, count raw
    assert not _plan(layouts=lay, rules=rule).filtered(f"{TTFT}_bucket")
    both = rule | {f"{TTFT}_count": "llmtop:x_count:rate1m"}
    assert _plan(layouts=lay, rules=both).filtered(f"{TTFT}_bucket")
    q = p.buckets()
    assert q is not None and q.count("< ignoring (le) group_left ()") == 1
    assert f"rate({TTFT}_count" in q
    assert "< ignoring" not in (_plan().buckets() or "")
    # the zero buckets go too, as the _sum is asked: a lone bucket is found by the mean
    assert p.zero_cut(f"{TTFT}_bucket") and q.count("[60s]))) > 0) < ignoring") == 1
    no_sum = _plan(layouts=lay, names={f"{TTFT}_bucket": "bucket", f"{TTFT}_count": "counter"})
    assert no_sum.filtered(f"{TTFT}_bucket") and not no_sum.zero_cut(f"{TTFT}_bucket")
    assert "> 0" not in (no_sum.buckets() or "")
    lean = _plan(layouts=lay, detail_only=frozenset({f"{TTFT}_sum"}))
    assert not lean.zero_cut(f"{TTFT}_bucket")


def test_detail_only_buckets_are_left_out_of_the_refresh():
    names = _plan().names | {"vllm:e2e_request_latency_seconds_count": "counter"}
    p = _plan(names=names, detail_only=frozenset({"vllm:e2e_request_latency_seconds_bucket",
                                                  "vllm:e2e_request_latency_seconds_count"}))
    assert "e2e_request_latency" not in (p.buckets() or "") + (p.counters() or "")
    assert f"{TTFT}_count" in (p.counters() or "")
    assert "e2e_request_latency" in (_plan(names=names).buckets() or "")


def test_the_bucket_union_is_split_into_parts_of_like_length():
    parts = [f'label_replace(x{i}{"y" * (50 + 7 * i)}, "llmtop_name", "n{i}", "", "")'
             for i in range(9)]
    expr = " or ".join(parts)
    halves = split_union(expr, at_least=2)
    assert len(halves) == 2 and " or ".join(halves) == expr
    assert abs(len(halves[0]) - len(halves[1])) < len(expr) / 3
    assert split_union(expr) == [expr]
    assert all(len(c) <= 300 for c in split_union(expr, limit=300, at_least=2))
    p = _plan(bucket_parts=2, names=_plan().names | {
        "vllm:request_queue_time_seconds_bucket": "bucket"})
    assert {k for k in p.queries() if k.startswith("buckets")} == {"buckets#0", "buckets#1"}


def test_a_record_carries_the_layouts():
    rec = {"lay": {f"{TTFT}_bucket": [repr(b) for b in LAYOUT], "bad": ["x"]}}
    assert layouts_of(rec) == {f"{TTFT}_bucket": LAYOUT}
    assert layouts_of({}) == {}


# vLLM's and SGLang's TTFT bounds (tests/fixtures/metrics: vllm-generated-v0.33.0-loggers.txt,
# sglang-generated-v0.5.23-metrics_collector.txt)
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf)
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0,
               100.0, 200.0, 400.0, math.inf)


def _cum(bounds: tuple[float, ...], observations: list[float]) -> tuple[float, ...]:
    return tuple(float(sum(1 for o in observations if o <= b)) for b in bounds)


def test_a_model_on_two_bucket_layouts_gets_quantiles_from_the_shared_bounds():
    """A model served by vLLM and SGLang: the total's histogram is exact on the bounds both
    layouts have, so its quantiles exist (they were only a mean before) and equal
    histogram_quantile over those bounds."""
    from llmtop.fleet.rows import model_totals
    from llmtop.history.derive import bucket_quantile
    from llmtop.model import EngineSample, Hist, ModelSample

    obs_v = [0.05, 0.3, 0.3, 0.7, 1.5, 3.0, 12.0]
    obs_s = [0.15, 0.5, 0.9, 2.5, 2.5, 30.0]
    hv = Hist(VLLM_TTFT, _cum(VLLM_TTFT, obs_v), sum(obs_v), len(obs_v))
    hs = Hist(SGLANG_TTFT, _cum(SGLANG_TTFT, obs_s), sum(obs_s), len(obs_s))
    samples = [EngineSample(engine="vllm", models=[ModelSample("m", hists={"ttft": hv})]),
               EngineSample(engine="sglang", models=[ModelSample("m", hists={"ttft": hs})])]
    (total,) = model_totals(samples, 1.0)
    shared = (0.1, 1.0, 10.0, 20.0, 40.0, 80.0, math.inf)
    both = _cum(shared, obs_v + obs_s)
    assert total.engine is None and total.ttft_s is not None
    assert total.ttft_s.count == 13 and total.ttft_s.mean == pytest.approx(sum(obs_v + obs_s) / 13)
    for q, phi in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        want, _ = bucket_quantile(phi, shared, both)
        assert getattr(total.ttft_s, q) == pytest.approx(want), q
    # no shared finite bound: the mean only, never a made-up quantile
    odd = Hist((0.3, math.inf), (1.0, 2.0), 1.0, 2.0)
    samples[1].models[0].hists["ttft"] = odd
    (total,) = model_totals(samples, 1.0)
    assert total.ttft_s.p50 is None and total.ttft_s.mean is not None


def test_the_tui_monitor_is_lean_unless_it_records():
    """The fleet TUI leaves detail-only buckets out of each refresh (the detail screen asks
    them for its row: tests/fleet/test_fleet_detail_windows.py); a recording keeps them."""
    from llmtop.cli.fleet import tui_monitor
    from llmtop.config import Config, PrometheusConfig

    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9"))

    class Rec:
        def record(self, _r: dict) -> None:
            pass

    rec = Rec()
    assert tui_monitor(cfg).lean
    mon = tui_monitor(cfg, rec)
    assert not mon.lean and mon.sink == rec.record


def test_detail_only_names_come_from_the_adapters_tables():
    from llmtop.fleet.queries import detail_only

    assert detail_only("vllm:e2e_request_latency_seconds_bucket")
    assert detail_only("vllm:request_decode_time_seconds_bucket")
    assert detail_only("sglang:e2e_request_latency_seconds_bucket")
    assert detail_only("vllm:e2e_request_latency_seconds_count")  # its mean too
    assert detail_only("sglang:generation_tokens_histogram_sum")
    assert detail_only("vllm:iteration_tokens_total_bucket")  # the step size
    assert detail_only("vllm:iteration_tokens_total_count")
    assert not detail_only("vllm:request_success_total")
    for table_hist in ("vllm:time_to_first_token_seconds_bucket",
                       "vllm:time_to_first_token_seconds_count",
                       "vllm:request_queue_time_seconds_bucket",
                       "vllm:request_prompt_tokens_bucket"):  # the table and diagnosis use these
        assert not detail_only(table_hist)
