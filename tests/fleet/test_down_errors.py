"""A down row says why: the target's last scrape error from ``/api/v1/targets``
(``fleet.states.down_errors``), matched to the down group by job and instance."""

from __future__ import annotations

from llmtop.fleet.states import down_errors


def _target(job: str, instance: str, error: str) -> dict:
    return {"labels": {"job": job, "instance": instance}, "lastError": error}


def test_each_down_group_gets_its_targets_last_error():
    down = {("a:8000",): {"job": "vllm", "instance": "a:8000"},
            ("b:8000",): {"job": "vllm", "instance": "b:8000"}}
    body = {"data": {"activeTargets": [
        _target("vllm", "a:8000", "connection refused"),
        _target("vllm", "b:8000", ""),  # down, but no error said: the row keeps "up == 0"
        _target("vllm", "c:8000", "timeout"),  # not a down group of this refresh
        _target("other", "a:8000", "404"),  # same instance, another job
    ]}}
    assert down_errors(body, down) == {("a:8000",): "down: connection refused"}


def test_an_answer_without_targets_says_nothing():
    down = {("a:8000",): {"job": "vllm", "instance": "a:8000"}}
    assert down_errors({}, down) == {}
    assert down_errors({"data": None}, down) == {}
    assert down_errors({"data": {"activeTargets": [{"lastError": "x"}]}}, down) == {}
