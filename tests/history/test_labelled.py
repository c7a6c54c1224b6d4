"""Labelled families of ``ModelSample`` (``gauges_by``, ``counters_by``, ``hists_by``: one
value per stage, queue, source or tier) go through the same machinery as plain values:
summed over ranks, NaN dropped, a decrease is a restart, shared when unchanged."""

from __future__ import annotations

import math

import pytest

from llmtop.history.derive import derive_lifetime, restart_reason
from llmtop.history.rows import clean_sample, share_with
from llmtop.model import LABELLED, EngineSample, Hist, ModelSample
from llmtop.parse.common import aggregate, put_value


def _h(count: float) -> Hist:
    return Hist((0.1, math.inf), (count, count), 0.05 * count, count)


def _m(tokens: float, queue: float = 1.0, stage: float = 10.0) -> ModelSample:
    m = ModelSample("m")
    put_value(m, "counters", "prompt_tokens", tokens, "external_kv_transfer")
    put_value(m, "gauges", "kv_queue", queue, "decode_transfer")
    put_value(m, "hists", "kv_stage", _h(stage), "bootstrap")
    return m


def test_put_value_takes_declared_families_only():
    m = _m(5.0)
    assert m.counters_by == {"prompt_tokens": {"external_kv_transfer": 5.0}}
    assert m.counters == {}  # no "prompt_tokens:external_kv_transfer" key
    assert set(LABELLED) == {"gauges", "counters", "hists"}
    with pytest.raises(KeyError):
        put_value(m, "counters", "prompt_tokens_by_sauce", 1.0, "x")


def test_ranks_sum_per_label():
    out = aggregate("m", [_m(5.0, 1.0, 10.0), _m(7.0, 2.0, 30.0)])
    assert out.counters_by == {"prompt_tokens": {"external_kv_transfer": 12.0}}
    assert out.gauges_by == {"kv_queue": {"decode_transfer": 3.0}}
    assert out.hists_by["kv_stage"]["bootstrap"].count == 40.0
    one = aggregate("m", [_m(5.0)])
    assert one.counters_by == {"prompt_tokens": {"external_kv_transfer": 5.0}}


def test_nan_is_dropped_and_a_decrease_is_a_restart():
    bad = clean_sample(EngineSample("vllm", models=[_m(math.nan)])).models[0]
    assert "prompt_tokens" not in bad.counters_by  # not reported, never 0
    assert bad.gauges_by == {"kv_queue": {"decode_transfer": 1.0}}
    before, after = EngineSample("vllm", models=[_m(50.0)]), EngineSample("vllm", models=[_m(2.0)])
    assert restart_reason(before, after) == "counter prompt_tokens:external_kv_transfer went down"
    fewer = EngineSample("vllm", models=[_m(50.0, stage=2.0)])
    assert restart_reason(before, fewer) == "histogram kv_stage:bootstrap count went down"
    assert restart_reason(before, EngineSample("vllm", models=[_m(60.0)])) is None


def test_unchanged_labelled_hists_are_shared_and_kept_in_lifetime():
    a, b = EngineSample("vllm", models=[_m(5.0)]), EngineSample("vllm", models=[_m(6.0)])
    share_with(a, b)
    assert b.models[0].hists_by["kv_stage"]["bootstrap"] is a.models[0].hists_by[
        "kv_stage"]["bootstrap"]
    life = derive_lifetime(b.models[0])
    assert life["kv_stage:bootstrap_s"].count == 10.0
