"""TTFT and ITL against a fixed-delay server (truth: TTFT 200 ms, ITL 20 ms), within 5 %.

The fixed-delay server keeps its schedule only while it gets the CPU: on a 2-core box with
four test workers a burst of other tests can starve it (and the probe) for tens of
milliseconds, and the truth itself moves. So each case measures up to three times and
passes on the first measurement within 5 %, as a benchmark takes its best run. A run off by
more than 5 % fails the test unless it was inconclusive: the server wrote its first tokens
late (its own ``/stats``: the truth moved) or the probe said it was client-bound (its
numbers measured the generator, and it said so). A probe that is wrong (a bias, a lost
token) is wrong in a conclusive run and fails; with no conclusive run at all the test skips
and says why.
"""

from __future__ import annotations

import httpx
import pytest

from llmtop.loadgen.api import start_probe
from llmtop.loadgen.options import ProbeOptions

ATTEMPTS = 3
SERVER_LATE_OK_S = 0.005
"""A run whose server wrote its first tokens later than this on average (mean over its
streams) measured a moved truth."""


def _server_late(before: dict, after: dict) -> float:
    """Mean lateness of the first token the mock wrote for the streams between two /stats."""
    n = after["first_late_n"] - before["first_late_n"]
    if n <= 0:
        return 0.0
    total = ((after["first_late_mean_s"] or 0.0) * after["first_late_n"]
             - (before["first_late_mean_s"] or 0.0) * before["first_late_n"])
    return total / n


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/stats", timeout=10).json()


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
    inconclusive: list[str] = []
    for _ in range(ATTEMPTS):
        before = _stats(slow_mock.url)
        report, step, events = _measure(slow_mock.url, conc, duration)
        late = _server_late(before, _stats(slow_mock.url))
        # what does not depend on the machine's load holds every time
        assert step["requests"] >= conc
        assert step["errors"] == {}
        assert step["achieved_concurrency"] >= 0.9 * conc
        assert step["output_tokens"] == 10 * step["requests"]
        assert report["prompt_calibration"]["method"] == "tokenize"
        assert any(e["type"] == "progress" for e in events)
        miss = _timing_misses(step)
        if not miss:
            return
        if step["client_bound"]:
            assert step["client_bound_reasons"], step  # it says why
            inconclusive.append(f"client-bound ({'; '.join(step['client_bound_reasons'])}): "
                                f"{miss}")
        elif late > SERVER_LATE_OK_S:
            inconclusive.append(f"server late by {late * 1000:.1f} ms: {miss}")
        else:
            misses.append(miss)
    if misses:
        pytest.fail(f"timings off by more than 5 % in {len(misses)} conclusive run(s): "
                    f"{misses}; inconclusive: {inconclusive}")
    pytest.skip(f"no conclusive run on this loaded machine: {inconclusive}")
