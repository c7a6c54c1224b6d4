"""Coarse buckets: where a quantile is only a bucket bound (``Quantiles.below``) or moves
inside one bucket, the rules judge the windowed mean against the baseline's mean, and say so.

Shapes: vLLM's ``request_prefill_time_seconds`` buckets start at 0.3 s, so 20-80 ms prefills
give p95 = 0.3 flagged ``below`` before and after a change; vLLM's ITL buckets are
10/25/50 ms, so ITLs that stay within (25, 50] ms interpolate to the same p50 (37.5 ms).
"""

from __future__ import annotations

from llmtop.diagnose import diagnose
from llmtop.model import Quantiles
from tests.diagnose.rows import base, healthy, q

BOUND = Quantiles(p50=0.3, p90=0.3, p95=0.3, p99=0.3, count=60,
                  below=("p50", "p90", "p95", "p99"))


def prefill(mean: float) -> Quantiles:
    """vLLM prefill times under the 0.3 s first bucket, mean ``mean``."""
    return Quantiles(**{**BOUND.to_json(), "mean": mean, "below": BOUND.below,
                        "above": ()})


def itl(mean: float) -> Quantiles:
    """6000 ITLs all within vLLM's (25, 50] ms bucket."""
    return Quantiles(p50=0.0375, p90=0.0475, p95=0.04875, p99=0.04975, mean=mean, count=6000)


USUAL = {"prefill_p50": 0.3, "prefill_p95": 0.3, "prefill_mean": 0.021,
         "ttft_p95": 0.35, "ttft_mean": 0.12}


def run(row, b):
    return diagnose([row], baselines={row.key: b})


def test_long_prompts_warns_on_the_prefill_mean_when_p95_is_a_bucket_bound():
    r = healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=prefill(0.074),
                ttft_s=q(0.12, 0.35, 60))
    (f,) = run(r, base(**USUAL))
    assert (f.rule, f.severity) == ("long_prompts", "warn")
    assert "prefill mean 74 ms vs 21 ms usual" in f.summary
    ev = {e.signal: e for e in f.evidence}
    assert ev["prefill_mean"].baseline == 0.021 and ev["prefill_mean"].value == 0.074
    assert "upper bound" in str(ev["prefill_p95"].threshold)


def test_long_prompts_with_the_prefill_mean_unchanged_stays_info():
    r = healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=prefill(0.023),
                ttft_s=q(0.12, 0.35, 60))
    (f,) = run(r, base(**USUAL))
    assert (f.rule, f.severity) == ("long_prompts", "info")


def test_prefix_cache_miss_warns_on_the_prefill_mean():
    r = healthy(prefix_hit_rate=0.05, prefill_s=prefill(0.06), ttft_s=q(0.12, 0.35, 60))
    (f,) = run(r, base(**USUAL))
    assert (f.rule, f.severity) == ("prefix_cache_miss", "warn")
    assert "prefill mean" in f.summary


def test_bound_quantile_without_a_mean_baseline_cannot_tell():
    """No usual mean (an old baseline): the bound p95 says nothing; TTFT p95 is judged."""
    r = healthy(prompt_len=q(3200, 7000, 60, p90=6000), prefill_s=prefill(0.074),
                ttft_s=q(0.12, 0.36, 60))
    (f,) = run(r, base(prefill_p95=0.3))
    ev = {e.signal for e in f.evidence}
    assert "ttft_p95" in ev and "prefill_p95" not in ev and f.severity == "info"


def test_decode_slowdown_inside_one_itl_bucket_is_seen_in_the_mean():
    r = healthy(itl_s=itl(0.046))
    (f,) = run(r, base(itl_p50=0.0375, itl_mean=0.028))
    assert (f.rule, f.severity) == ("decode_slowdown", "warn")
    assert "ITL mean 46 ms" in f.summary
    ev = {e.signal: e for e in f.evidence}
    assert "inside one bucket" in str(ev["itl_p50"].threshold)


def test_same_bucket_same_mean_is_healthy():
    assert run(healthy(itl_s=itl(0.029)), base(itl_p50=0.0375, itl_mean=0.028)) == []
    # the mean up 1.5x but by less than the 10 ms floor: noise
    assert run(healthy(itl_s=itl(0.0105)), base(itl_p50=0.0375, itl_mean=0.007)) == []
