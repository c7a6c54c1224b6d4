"""TTFT and ITL against a fixed-delay server (truth: TTFT 200 ms, ITL 20 ms), within 5 %."""

from __future__ import annotations

import pytest

from llmtop.loadgen.api import start_probe
from llmtop.loadgen.options import ProbeOptions


@pytest.mark.parametrize(("conc", "duration"), [(1, 2.5), (64, 3.5)])
def test_ttft_itl_within_5_percent(slow_mock, conc, duration):
    opts = ProbeOptions(url=slow_mock.url, concurrency=conc, duration=duration,
                        output_tokens=10, prompt_tokens=64, warmup=0.5)
    h = start_probe(opts)  # the real path: separate process, uvloop when importable
    events = h.wait(30)
    report = h.result()
    assert report is not None, h.errors
    step = report["steps"][0]
    assert step["requests"] >= conc
    assert step["errors"] == {}
    assert step["ttft_s"]["mean"] == pytest.approx(0.200, rel=0.05)
    assert step["ttft_s"]["p50"] == pytest.approx(0.200, rel=0.05)
    assert step["itl_s"]["p50"] == pytest.approx(0.020, rel=0.05)
    assert step["itl_request_s"]["mean"] == pytest.approx(0.020, rel=0.05)
    assert step["tpot_s"]["mean"] == pytest.approx(0.020, rel=0.05)
    assert step["achieved_concurrency"] >= 0.9 * conc
    assert step["output_tokens"] == 10 * step["requests"]
    assert report["prompt_calibration"]["method"] == "tokenize"
    assert any(e["type"] == "progress" for e in events)
