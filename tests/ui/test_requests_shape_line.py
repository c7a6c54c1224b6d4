"""The requests screen's shape line names where the slowest ran only when the window holds
more than one engine (one engine: "on X (rest: X)" says nothing)."""

from __future__ import annotations

from llmtop.ui.screens.requests_cells import shape_text

BASE = {"count": 40, "ttft_p50_s": 0.04, "ttft_p95_s": 0.09, "e2e_p50_s": 1.6,
        "e2e_p95_s": 3.1, "slow_count": 4, "by": "ttft_s", "slow_min_s": 0.066,
        "slow_prompt_median": 559, "rest_prompt_median": 370, "slow_queue_median_s": 0.002,
        "rest_queue_median_s": 0.005, "slow_queue_share": 0.37}


def test_one_engine_names_no_place():
    s = dict(BASE, slow_targets={"vllm@127.0.0.1:8000": 4},
             rest_targets={"vllm@127.0.0.1:8000": 36})
    text = shape_text(s, "last 1 min", 0).plain
    assert "Slowest 4" in text and "37 % of their TTFT queued" in text
    assert " on " not in text and "(rest:" not in text


def test_two_engines_say_where_the_slowest_ran():
    s = dict(BASE, slow_targets={"sglang@127.0.0.1:30000": 4},
             rest_targets={"vllm@127.0.0.1:8000": 36})
    text = shape_text(s, "last 1 min", 0).plain
    assert "on sglang@:30000 4 (rest: vllm@:8000 36)" in text, text
