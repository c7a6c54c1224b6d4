"""Edges of matching live rows to capacity profiles and of shape drift: two models behind one
host:port, the newest of several profiles, output-length drift both ways and the minimum
number of requests below which no length drift is judged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from llmtop.capacity import annotate_rows, load_profiles, profile_from_report, save_profile
from llmtop.capacity.annotate import DRIFT_MIN_REQUESTS, drift, match
from tests.capacity.test_profiles import NOW, report
from tests.diagnose.rows import healthy, q

URL = "http://127.0.0.1:8000"


def _profile(model="llama", rps=4.0, age_s=3600.0):
    p = profile_from_report(report(rps=rps), engine="vllm")
    return replace(p, model=model, measured_unix=NOW - age_s)


def test_two_models_at_one_host_port_each_get_their_own_profile():
    llama, qwen = _profile("llama", 4.0), _profile("qwen", 9.0)
    for order in ([llama, qwen], [qwen, llama]):
        assert match(order, url=URL, model="llama") is llama
        assert match(order, url=URL, model="qwen") is qwen
        assert match(order, url=URL, model="mistral") is None
    # a profile that names no model stands for whatever that host:port serves
    anyone = replace(llama, model=None)
    assert match([anyone], url=URL, model="mistral") is anyone
    # the same model at another port is another engine
    assert match([llama], url="http://127.0.0.1:8001", model="llama") is None


def test_the_newest_of_several_saved_profiles_wins(tmp_path):
    folder = tmp_path / "capacity"
    for age, rps in ((3 * 86400, 1.0), (3600, 3.0), (2 * 86400, 2.0)):
        save_profile(_profile(rps=rps, age_s=age), folder)
    profiles = load_profiles(folder=folder)
    assert [p.requests_per_s for p in profiles] == [3.0, 2.0, 1.0]
    row = healthy(requests_per_s=1.5)
    annotate_rows([row], profiles, NOW, urls={row.target: URL})
    assert row.capacity["requests_per_s"] == 3.0
    assert row.capacity_used == pytest.approx(0.5)


@pytest.mark.parametrize("mean, words", [
    (400.0, "outputs 2.0× longer than when measured"),
    (100.0, "outputs 2.0× shorter than when measured"),
    (290.0, None),  # 1.45× longer: within the bound
])
def test_output_length_drift_both_ways(mean, words):
    p = _profile()  # measured output mean 200
    row = healthy(gen_len=q(mean, 2 * mean, 60))
    got = [d for d in drift(row, p) if d["what"] == "output"]
    assert [d["text"] for d in got] == ([words] if words else [])


def test_no_length_drift_is_judged_on_too_few_requests():
    p = _profile()
    few = healthy(gen_len=q(400.0, 800.0, DRIFT_MIN_REQUESTS - 1),
                  prompt_len=q(1600.0, 3000.0, DRIFT_MIN_REQUESTS - 1))
    assert [d["what"] for d in drift(few, p) if d["what"] != "prefix_hit_rate"] == []
    enough = healthy(gen_len=q(400.0, 800.0, DRIFT_MIN_REQUESTS),
                     prompt_len=q(1600.0, 3000.0, DRIFT_MIN_REQUESTS))
    assert [d["what"] for d in drift(enough, p) if d["what"] != "prefix_hit_rate"] == [
        "prompt", "output"]
