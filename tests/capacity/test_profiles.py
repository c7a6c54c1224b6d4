"""Capacity profiles: made from a probe report, saved, loaded, matched, drift."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from llmtop.capacity import (
    annotate_rows,
    load_profile_file,
    load_profiles,
    profile_dir,
    profile_from_report,
    save_profile,
)
from llmtop.capacity.annotate import STALE_AFTER_S, match
from llmtop.errors import ConfigError
from tests.diagnose.rows import healthy, q

NOW = 1_800_000_000.0


def report(met: bool = True, rps: float = 4.0, top: int = 16) -> dict:
    return {"target": "http://127.0.0.1:8000/v1/completions", "model": "llama",
            "started_unix": NOW - 3600,
            "steps": [{"concurrency": c, "requests": 100} for c in (4, 8, top)],
            "sla_boundary": {"met": met, "requests_per_s": rps if met else None,
                             "concurrency": 8 if met else None,
                             "output_tokens_per_s": 400.0, "slo": {"ttft": 0.5, "itl": None}},
            "lengths": {"actual": {"prompt": {"mean": 380.0, "p90": 700.0},
                                   "output": {"mean": 200.0, "p90": 390.0}}},
            "traffic": {"prefix_hit_rate": 0.6}}


def test_profile_round_trips_through_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    p = profile_from_report(report(), engine="vllm")
    assert p is not None and p.requests_per_s == 4.0 and p.netloc == "127.0.0.1:8000"
    path = save_profile(p)
    assert path.parent == tmp_path / "llmtop" / "capacity" == profile_dir()
    (got,) = load_profiles()
    assert (got.requests_per_s, got.model, got.engine, got.slo["ttft"]) == (4.0, "llama",
                                                                             "vllm", 0.5)
    assert got.shape["prompt_mean"] == 380.0 and got.shape["prefix_hit_rate"] == 0.6


def test_no_sla_boundary_no_profile(tmp_path):
    assert profile_from_report(report(met=False)) is None
    f = tmp_path / "r.json"
    f.write_text(json.dumps(report(met=False)))
    with pytest.raises(ConfigError, match="no SLA boundary"):
        load_profile_file(str(f))


def test_a_run_that_never_failed_the_slo_found_no_boundary():
    assert profile_from_report(report(top=8)) is None


def test_a_bakeoff_saves_one_profile_per_engine_with_a_boundary(tmp_path):
    doc = {"kind": "bakeoff", "endpoints": [
        {**report(), "engine": "vllm", "settings": {"max_num_seqs": 8}, "error": None},
        {**report(met=False), "engine": "sglang", "error": None}]}
    f = tmp_path / "b.json"
    f.write_text(json.dumps(doc))
    (p,) = load_profile_file(str(f))
    assert (p.engine, p.settings, p.source) == ("vllm", {"max_num_seqs": 8}, "bakeoff")


def test_capacity_file_reads_a_probe_report(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps(report(rps=3.0)))
    (p,) = load_profiles(str(f))
    assert p.requests_per_s == 3.0


def test_rows_match_by_host_port_and_model_and_fill_capacity_used():
    p = profile_from_report(report(), engine="vllm")
    row = healthy(requests_per_s=3.0)
    other = healthy(target="vllm@127.0.0.1:9000", requests_per_s=3.0)
    annotate_rows([row, other], [p], NOW, urls={row.target: "http://127.0.0.1:8000"})
    assert row.capacity_used == pytest.approx(0.75)
    assert row.capacity["requests_per_s"] == 4.0 and row.capacity["age_s"] == 3600
    assert row.capacity_drift == [] and not row.capacity["stale"]
    assert other.capacity_used is None and other.capacity is None
    assert row.to_json()["capacity_used"] == pytest.approx(0.75)
    assert other.to_json()["capacity"] is None


def test_fleet_rows_match_by_model_engine_and_gpu():
    p = replace(profile_from_report(report(), engine="vllm"), gpu="NVIDIA H100")
    assert match([p], url="10.0.0.7:8000", model="llama", engine="vllm", gpu="NVIDIA H100") is p
    assert match([p], url="10.0.0.7:8000", model="llama", engine="vllm", gpu="L4") is None


def test_longer_prompts_and_fewer_prefix_hits_are_drift():
    p = profile_from_report(report(), engine="vllm")
    row = healthy(prompt_len=q(800, 1600, 60), prefix_hit_rate=0.2)
    annotate_rows([row], [p], NOW, urls={row.target: p.url})
    assert [d["what"] for d in row.capacity_drift] == ["prompt", "prefix_hit_rate"]
    assert row.capacity_drift[0]["text"] == "prompts 2.1× longer than when measured"
    assert row.to_json()["capacity"]["drift"][0]["ratio"] == pytest.approx(800 / 380)


def test_same_shape_is_not_drift_and_old_profiles_are_stale():
    p = profile_from_report(report(), engine="vllm")
    row = healthy(prompt_len=q(420, 900, 60))
    annotate_rows([row], [p], p.measured_unix + STALE_AFTER_S + 1, urls={row.target: p.url})
    assert row.capacity_drift == [] and row.capacity["stale"]
