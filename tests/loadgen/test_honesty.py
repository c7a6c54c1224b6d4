"""The load generator never lies: stalls, lateness from the schedule, counts that add up."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from llmtop.loadgen import knee
from llmtop.loadgen.client import Result
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.reconcile import Tally
from llmtop.loadgen.report import honesty_lines, to_markdown
from llmtop.loadgen.runner import Runner
from llmtop.loadgen.stats import step_is_client_bound, summarize_step
from llmtop.loadgen.worker import run_probe

from .conftest import probe
from .mock_server import start_mock


def _ok(t_send: float, ttft: float, intended: float | None = None) -> Result:
    r = Result(t_send, intended)
    r.t_first = t_send + ttft
    r.t_last = r.t_end = t_send + ttft + 0.1
    r.n_content = r.output_tokens = 4
    return r


def test_stalls_make_a_step_client_bound_in_words():
    step = summarize_step([_ok(0.0, 0.1)] * 4, duration_s=10.0, concurrency=1,
                          achieved_concurrency=1.0,
                          stalls=[(1.0, 0.8), (4.0, 0.9), (7.5, 0.7)])
    assert step["stalls"]["count"] == 3
    assert step["stalls"]["total_s"] == pytest.approx(2.4)
    assert step["stalls"]["longest_s"] == pytest.approx(0.9)
    assert step["client_bound"] is True
    assert "generator paused 3 times, 2.4 s in all" in step["client_bound_reasons"]
    assert step_is_client_bound(step) == (True, step["client_bound_reasons"])
    calm = summarize_step([_ok(0.0, 0.1)] * 4, duration_s=10.0, concurrency=1,
                          achieved_concurrency=1.0, stalls=[(1.0, 0.2)])
    assert step_is_client_bound(calm) == (False, [])  # 2 % of the window: not bound


def test_lateness_from_the_schedule():
    # sent 0.5 s after its intended time; the server answered 0.1 s after the send
    rs = [_ok(10.0 + i, 0.1, intended=9.5 + i) for i in range(5)]
    step = summarize_step(rs, duration_s=5.0, rate=1.0, achieved_rate=1.0,
                          generator_lateness=[0.5] * 5)
    assert step["send_lateness_s"]["p99"] == pytest.approx(0.5)
    assert step["ttft_s"]["p50"] == pytest.approx(0.1)
    assert step["ttft_from_schedule_s"]["p50"] == pytest.approx(0.6)
    assert step["e2e_from_schedule_s"]["p50"] == pytest.approx(0.7)
    assert any("sent late" in r for r in step["client_bound_reasons"])
    closed = summarize_step(rs, duration_s=5.0, concurrency=1, achieved_concurrency=1.0)
    assert "send_lateness_s" not in closed  # closed loop: no schedule


def test_a_rate_shortfall_is_judged_against_what_the_schedule_made_due():
    rs = [_ok(float(i), 0.1, intended=float(i)) for i in range(6)]
    # a constant 10/s schedule that sent 6/s: the generator fell short
    short = summarize_step(rs, duration_s=1.0, rate=10.0, achieved_rate=6.0, due_rate=10.0,
                           cap_waits=0, generator_lateness=[0.0] * 6)
    assert "achieved rate 6.00/s < 95% of 10/s due" in short["client_bound_reasons"]
    # a Poisson schedule that made only 6 due in the window and sent all 6: not short
    poisson = summarize_step(rs, duration_s=1.0, rate=10.0, achieved_rate=6.0, due_rate=6.0,
                             cap_waits=0, generator_lateness=[0.0] * 6)
    assert poisson["client_bound"] is False and poisson["due_rate"] == 6.0
    # a Poisson window that made nothing due (a last step cut short by --duration on a
    # loaded box: census run 7) sent nothing and fell short of nothing
    empty = summarize_step([], duration_s=0.05, rate=10.0, achieved_rate=0.0, due_rate=0.0,
                           cap_waits=0, generator_lateness=[])
    assert not any("achieved rate" in r for r in empty["client_bound_reasons"]), empty
    # the concurrency cap held requests for a seat: the server's seats set the rate
    capped = summarize_step(rs, duration_s=1.0, rate=10.0, achieved_rate=6.0, due_rate=10.0,
                            cap_waits=4, generator_lateness=[0.0] * 6)
    assert capped["client_bound"] is False and capped["cap_waits"] == 4


async def test_a_capped_poisson_sweep_is_not_client_bound_by_its_own_schedule(fast_mock):
    report, _ = await probe(ProbeOptions(
        url=fast_mock.url, rate=10, poisson=True, sweep=True, concurrency=4,
        step_duration=0.8, warmup=0.2, duration=2.4, output_tokens=8, prompt_tokens=16))
    for s in report["steps"]:
        assert s["due_rate"] is not None and s["cap_waits"] is not None
        assert not any("achieved rate" in r for r in s["client_bound_reasons"]), s


def test_client_bound_steps_are_never_the_capacity():
    def step(i: int, c: int, tput: float, bound: bool) -> dict:
        q = {"p50": 0.1, "p90": 0.1, "p95": 0.1, "p99": 0.1, "mean": 0.1}
        return {"index": i, "concurrency": c, "requests": 10, "output_tokens_per_s": tput,
                "requests_per_s": tput / 10, "goodput_per_s": 1.0, "ttft_s": q,
                "itl_request_s": q, "tpot_s": q, "error_rate": 0.0, "client_bound": bound}

    steps = [step(0, 1, 100, False), step(1, 2, 500, True), step(2, 4, 300, False)]
    assert knee.max_throughput(steps)["concurrency"] == 4
    assert knee.sla_boundary(steps, {"ttft": 1.0})["concurrency"] == 4


def test_a_mismatch_is_a_warning_never_silent():
    t = Tally()
    for _ in range(3):
        t.done(_ok(0.0, 0.1), 4)
    t.server = 12
    assert t.to_json(3, 3)["ok"] is True
    t.server = 20  # the server generated 8 tokens nobody received, and nothing was cut off
    rec = t.to_json(3, 3)
    assert rec["ok"] is False and "server counted 20" in rec["warnings"][0]
    assert t.to_json(4, 4)["ok"] is False  # one request sent and never accounted for
    lines = honesty_lines({"steps": [], "reconciliation": rec})
    assert lines[0].startswith("WARNING: counts do not add up")


@pytest.fixture(scope="module")
def counting_mock():
    """TTFT 200 ms, ITL 20 ms, exporting its generation-token counter."""
    with start_mock(ttft=0.2, itl=0.02, metrics=True) as m:
        yield m


def _served(url: str) -> dict:
    return httpx.get(f"{url}/stats", timeout=10).json()


async def test_a_slowed_generator_reports_its_lateness_and_the_latency_from_the_schedule(
        counting_mock, monkeypatch):
    """20 req/s asked of a generator that can send only 10/s: each request goes out later
    than the last; TTFT from the schedule is the server's 200 ms plus that lateness."""
    gate = asyncio.Lock()
    one = Runner._one

    async def slowed(self, intended, ready):
        async with gate:  # the generator's own work: 100 ms per request, one at a time
            await asyncio.sleep(0.1)
        await one(self, intended, ready)

    monkeypatch.setattr(Runner, "_one", slowed)
    report, _ = await probe(ProbeOptions(url=counting_mock.url, rate=20.0, duration=3.0,
                                         output_tokens=4, prompt_tokens=16))
    s = report["steps"][0]
    late = s["send_lateness_s"]
    assert late["max"] > 0.8 and late["p50"] > 0.3, late
    assert s["client_bound"] and any("sent late" in r for r in s["client_bound_reasons"])
    # The server's TTFT is 200 ms from arrival (never less). Measured from the send it
    # leaves the lateness out; from the schedule it holds it (the truth a user saw). The
    # lateness is far larger than any timing noise (p50 > 300 ms, forced by the 100 ms
    # gate), so the checks are on which side of it each view falls, not a race of ms.
    ttft, sched = s["ttft_s"], s["ttft_from_schedule_s"]
    # each request's TTFT from the schedule is its TTFT from the send (>= 200 ms) plus its
    # own lateness, so every quantile of it is at least 200 ms + that of the lateness
    assert ttft["p50"] >= 0.2 and sched["p50"] >= 0.2 + late["p50"] - 0.001, (ttft, sched, late)
    assert sched["p99"] >= 0.2 + late["p99"] - 0.001, (sched, late)
    # the lateness is not in the TTFT from the send: unless the mock itself wrote late (its
    # own measure of how late its first events went out), that is the server's 200 ms
    mock_late = _served(counting_mock.url)["first_late_mean_s"] or 0.0
    if ttft["p50"] >= 0.2 + late["p50"] / 2 and mock_late > 0.02:
        pytest.skip(f"inconclusive: the mock wrote its first events {1000 * mock_late:.0f} ms "
                    f"late on average (TTFT p50 {ttft['p50']:.3f} s, lateness p50 "
                    f"{late['p50']:.3f} s)")
    assert ttft["p50"] < 0.2 + late["p50"] / 2, (ttft, late, mock_late)
    assert report["max_throughput"] is None  # its only step was client-bound
    assert "sent late by" in to_markdown(report)


async def test_counts_add_up_when_the_run_cuts_requests_off(counting_mock):
    """A 1.2 s run of 2.2 s requests: all in flight at the end are cancelled; the tokens they
    had received, and the server's counter, still add up."""
    url = counting_mock.url
    before = _served(url)
    report, _ = await probe(ProbeOptions(url=url, concurrency=4, duration=1.2,
                                         output_tokens=100, prompt_tokens=16))
    rec = report["reconciliation"]
    after = _served(url)
    assert rec["ok"], rec
    assert rec["sent"] == rec["finished"] + rec["failed"] + rec["cancelled"]
    assert rec["cancelled"] == 4 and rec["finished"] == 0
    assert rec["cancelled_tokens"] > 0
    assert rec["server_generation_tokens"] >= rec["cancelled_tokens"]
    # the server received exactly the requests the probe sent (plus its setup requests)
    setup = report["preflight"]["requests"]
    assert after["streams"] - before["streams"] <= rec["sent"] + setup


async def test_counts_add_up_after_ctrl_c(counting_mock):
    url = counting_mock.url
    stop: list = []
    some_done = asyncio.Event()

    def on_event(e: dict) -> None:
        if e.get("type") == "progress" and e.get("requests_done"):
            some_done.set()

    task = asyncio.ensure_future(run_probe(
        ProbeOptions(url=url, concurrency=3, duration=30.0, output_tokens=40,
                     prompt_tokens=16, progress_interval=0.2), on_event, stop.append))
    await asyncio.wait_for(some_done.wait(), 60)
    stop[-1]("stopped")
    report = await asyncio.wait_for(task, 60)
    rec = report["reconciliation"]
    assert report["stop_reason"] == "stopped"
    assert rec["ok"], rec
    assert rec["finished"] >= 1 and rec["cancelled"] >= 1
    assert rec["sent"] == rec["finished"] + rec["failed"] + rec["cancelled"]
    assert rec["server_generation_tokens"] is not None


async def test_counts_add_up_on_a_server_that_closes_after_each_stream():
    """The llama-server pattern (final CRLF late, then a close): 8 of 8 requests, 16 tokens
    each, equal to the server's counter, run after run."""
    with start_mock(late_crlf=0.05, metrics=True) as m:
        for _ in range(5):
            report, _ = await probe(ProbeOptions(url=m.url, concurrency=2, max_requests=8,
                                                 output_tokens=16, prompt_tokens=16))
            rec = report["reconciliation"]
            assert rec["ok"] and rec["finished"] == 8 and rec["output_tokens"] == 128, rec
            # the server's counter covers the 2 one-token preflight requests too
            assert rec["server_generation_tokens"] == 128 + rec["preflight_output_tokens"] == 130
            assert sum(s["output_tokens"] for s in report["steps"]) == 128


def test_the_bakeoff_names_an_engine_whose_generator_stalled():
    from llmtop.loadgen.bakeoff import generator_warnings

    ok = {"name": "vllm-a", "steps": [{"concurrency": 4, "client_bound": False}],
          "reconciliation": {"ok": True}}
    stalled = {"name": "vllm-b", "steps": [
        {"concurrency": 8, "client_bound": True,
         "client_bound_reasons": ["generator paused 3 times, 2.4 s in all"]}],
        "reconciliation": {"ok": False, "warnings": ["8 requests sent but 7 finished"]}}
    w = generator_warnings([ok, stalled])
    assert len(w) == 2 and all(x.startswith("vllm-b:") for x in w)
    assert "c=8: generator paused 3 times, 2.4 s in all" in w[0]
