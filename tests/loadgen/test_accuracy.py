"""TTFT and ITL against a fixed-delay server (truth: TTFT 200 ms, ITL 20 ms), within 5 %.

The fixed-delay server keeps its schedule only while it gets the CPU: on a 2-core box with
four test workers a burst of other tests can starve it (and the probe) for tens of
milliseconds, and the truth itself moves. So each case measures up to three times and
passes on the first measurement within 5 %, as a benchmark takes its best run; a probe that
is wrong (a bias, a lost token) is wrong every time and fails all three.
"""

from __future__ import annotations

import pytest

from llmtop.loadgen.api import start_probe
from llmtop.loadgen.options import ProbeOptions

ATTEMPTS = 3


def _measure(url: str, conc: int, duration: float) -> tuple[dict, dict, list[dict]]:
    opts = ProbeOptions(url=url, concurrency=conc, duration=duration,
                        output_tokens=10, prompt_tokens=64, warmup=0.5)
    h = start_probe(opts)  # the real path: separate process, uvloop when importable
    events = h.wait(30)
    report = h.result()
    assert report is not None, h.errors
    return report, report["steps"][0], events


def _timing_misses(step: dict) -> list[str]:
    """The timings off by more than 5 % (empty: all within)."""
    want = {("ttft_s", "mean"): 0.200, ("ttft_s", "p50"): 0.200, ("itl_s", "p50"): 0.020,
            ("itl_request_s", "mean"): 0.020, ("tpot_s", "mean"): 0.020}
    return [f"{k}.{q} {step[k][q]:.4f} (want {v})" for (k, q), v in want.items()
            if step[k][q] != pytest.approx(v, rel=0.05)]


@pytest.mark.parametrize(("conc", "duration"), [(1, 2.5), (64, 3.5)])
def test_ttft_itl_within_5_percent(slow_mock, conc, duration):
    misses: list[list[str]] = []
    for _ in range(ATTEMPTS):
        report, step, events = _measure(slow_mock.url, conc, duration)
        # what does not depend on the machine's load holds every time
        assert step["requests"] >= conc
        assert step["errors"] == {}
        assert step["achieved_concurrency"] >= 0.9 * conc
        assert step["output_tokens"] == 10 * step["requests"]
        assert report["prompt_calibration"]["method"] == "tokenize"
        assert any(e["type"] == "progress" for e in events)
        misses.append(_timing_misses(step))
        if not misses[-1]:
            return
    pytest.fail(f"timings off by more than 5 % in all {ATTEMPTS} runs: {misses}")
