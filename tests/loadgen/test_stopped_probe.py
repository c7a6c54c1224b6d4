"""Issue 27: a probe stopped during a step says which step, how long it ran, that its numbers
are partial and why no capacity figure follows (not "no step finished" above its numbers)."""

from __future__ import annotations

import io

from rich.console import Console  # noqa: TID251 - testing the console layer

from llmtop.console.probe_view import print_summary
from llmtop.loadgen import report as rep

from .test_output_format import _step


def _stopped(*steps: dict, reason: str = "stopped", duration_s: float = 9.0) -> dict:
    return {"target": "http://127.0.0.1:1/v1/completions", "model": "m", "started": "x",
            "options": {"sweep": True}, "steps": list(steps), "saturation": None,
            "max_throughput": None, "sla_boundary": None, "stop_reason": reason,
            "duration_s": duration_s, "partial": True}


def _partial(i: int, conc: int, dur: float) -> dict:
    return {**_step(i, conc, None, 500.0), "partial": True, "duration_s": dur}


def test_stopped_during_the_first_step_names_it_and_its_partial_numbers():
    s = rep.capacity(_stopped(_partial(0, 4, 3.2)))["sentence"]
    assert "No step finished" not in s
    assert "first step" in s and "c=4" in s and "3.2 s" in s
    assert "partial" in s and "no capacity figure" in s and "whole step" in s


def test_stopped_during_warm_up_says_nothing_was_measured():
    s = rep.capacity(_stopped(duration_s=2.4))["sentence"]
    assert "Stopped after 2.4 s" in s and "before the first step" in s
    assert "no capacity figure" in s


def test_a_stopped_later_step_is_named_and_not_counted():
    whole = [_step(i, 2**i, None, 100.0 * (i + 1)) for i in range(2)]
    for s in whole:
        s["client_bound"] = False
    r = _stopped(*whole, _partial(2, 4, 1.5))
    r["max_throughput"] = {"concurrency": 2, "step": 1, "output_tokens_per_s": 200.0,
                           "requests_per_s": 2.0}
    s = rep.capacity(r)["sentence"]
    assert s.startswith("Peaks at 2.0 req/s")
    assert "Stopped 1.5 s into the c=4 step" in s and "not counted" in s


def test_error_rate_stop_says_so():
    s = rep.capacity(_stopped(_partial(0, 8, 4.0), reason="error_rate"))["sentence"]
    assert "error rate" in s and "c=8" in s and "partial" in s


def test_console_and_markdown_summaries_do_not_contradict_their_table():
    r = _stopped(_partial(0, 4, 3.2))
    out = io.StringIO()
    print_summary(r, console=Console(file=out, width=80))
    text = out.getvalue()
    assert "No step finished" not in text and "first step (c=4)" in text
    assert " 1* " in text, text  # the table counts from 1, as the sentence does
    md = rep.to_markdown(r)
    assert "No step finished" not in md and "first step (c=4)" in md
    assert "| 1 (partial) |" in md  # steps counted from 1 for people


def test_a_step_cut_by_the_time_budget_says_so():
    s = rep.capacity(_stopped(_partial(0, 8, 5.0), reason="duration"))["sentence"]
    assert s.startswith("Cut short 5.0 s into the first step (c=8) (the time budget ran out)")
