"""``baseline_values`` (the baseline's fast read of every signal) equals ``signal`` one by one,
on rows with quantiles, without, idle (count 0), and with NaN/Inf values."""

from __future__ import annotations

import math

import pytest

from llmtop.diagnose.signals import BASELINE_SIGNALS, baseline_values, signal
from llmtop.model import EngineRow, Quantiles


def _rows() -> list[EngineRow]:
    full = EngineRow(key="a|m", target="a", engine="vllm", model="m", running=3.0, waiting=0.0,
                     kv_cache_usage=0.5, prefix_hit_rate=0.2, requests_per_s=4.0)
    for i, attr in enumerate(("ttft_s", "queue_s", "prefill_s", "itl_s", "tpot_s",
                              "prompt_len", "iteration_tokens")):
        setattr(full, attr, Quantiles(count=10.0, p50=0.1 * (i + 1), p90=0.2, p95=0.3 * (i + 1),
                                      p99=0.5, mean=0.15 * (i + 1)))
    odd = EngineRow(key="b|m", target="b", engine="sglang", model="m", running=None)
    odd.ttft_s = Quantiles(count=0.0, p50=0.1)  # idle: no observation in the window
    odd.itl_s = Quantiles(count=5.0, p50=math.nan, p95=math.inf, mean=0.2)
    return [full, odd, EngineRow(key="c|m", target="c", engine="vllm", model="m")]


@pytest.mark.parametrize("row", _rows(), ids=["full", "odd", "empty"])
def test_baseline_values_equal_each_signal(row):
    got = baseline_values(row)
    want = [signal(row, n) for n in BASELINE_SIGNALS]
    assert got == want
    assert any(v is not None for v in want) or row.key == "c|m"
