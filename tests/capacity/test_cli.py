"""``llmtop capacity list`` and ``--capacity FILE`` on the command line."""

from __future__ import annotations

import json

from llmtop.capacity import Profile, save_profile
from llmtop.cli.main import main

NOW = 1_800_000_000.0


def test_list_shows_saved_profiles_and_says_when_there_are_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert main(["capacity", "list"]) == 0
    assert "no capacity profiles in" in capsys.readouterr().err
    save_profile(Profile(url="http://127.0.0.1:8000/v1/completions", requests_per_s=20.5,
                         output_tokens_per_s=164.0, measured_unix=NOW, model="llama",
                         engine="vllm", slo={"ttft": 0.25, "itl": None},
                         shape={"prompt_mean": 1501.0, "output_mean": 8.0}))
    assert main(["capacity", "list"]) == 0
    head, line = capsys.readouterr().out.splitlines()
    assert head.split()[:2] == ["MEASURED", "(UTC)"]
    assert line.split() == ["2027-01-15", "08:00", "http://127.0.0.1:8000/v1/completions",
                            "vllm", "llama", "–", "20.50", "164", "ttft", "250ms", "1501/8",
                            "probe"]
    assert main(["capacity", "list", "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["requests_per_s"] == 20.5 and doc["path"].endswith(".json")


def test_a_capacity_file_without_a_boundary_is_refused_without_traceback(tmp_path, capsys):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"target": "http://h:1", "sla_boundary": {"met": False}}))
    assert main(["--capacity", str(f), "--once", "127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "no SLA boundary met" in err and "Traceback" not in err
