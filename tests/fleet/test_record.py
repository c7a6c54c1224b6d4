"""Record and replay of fleet mode against a real Prometheus (fixtures in ``conftest.py``):
``llmtop --prometheus URL --record F`` stores each refresh's raw answers, and ``llmtop replay F
--at T --once --json`` rebuilds the rows a live ``--once`` printed at T."""

from __future__ import annotations

import json
import time

import pytest

from llmtop.cli.main import main
from llmtop.errors import RecordingError
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder

SAME = ("time", "window_s", "engines", "totals", "gpus", "gpu_error", "warnings", "partial",
        "error", "source", "scrape_interval_s", "diagnosis", "baseline")


def _run(capsys, argv: list[str]) -> tuple[int, dict]:
    rc = main(argv)
    out = capsys.readouterr().out
    return rc, json.loads(out)


def test_a_recorded_fleet_session_replays_as_it_was_live(prometheus_url, tmp_path, capsys,
                                                         monkeypatch):
    import llmtop.fleet.warm as warm_mod

    monkeypatch.setattr(warm_mod, "WARM_STEP_S", 5.0)  # seconds of history, not minutes
    path = str(tmp_path / "fleet.llrec")
    live = []
    deadline = time.monotonic() + 90
    while len(live) < 2:  # two refreshes, at two evaluation times (scrape interval 1 s)
        rc, doc = _run(capsys, ["--prometheus", prometheus_url, "--window", "20", "--once",
                                "--json", "--record", path])
        assert rc == 0 and doc["engines"]
        # each judged on a warm-up of 3 points or more (the server holds enough history)
        if doc["baseline"]["points"] >= 3 or time.monotonic() > deadline:
            live.append(doc)
        time.sleep(1.2)
    assert live[0]["time"] != live[1]["time"]
    assert all(doc["baseline"]["points"] >= 3 for doc in live), [d["baseline"] for d in live]
    rec = Recording.open(path)
    assert rec.header["schema"] == 2 and rec.header["mode"] == "fleet"
    assert sum(r.get("k") == "fq" for r in rec.records) == 2
    for doc in live:
        rc, back = _run(capsys, ["replay", path, "--at", f"@{doc['time']}", "--once", "--json"])
        assert rc == 0
        for key in SAME:  # the baseline too: the recording keeps the warm-up's answers
            assert back[key] == doc[key], key
    # between the two refreshes: the earlier one (the last evaluated at or before --at)
    rc, mid = _run(capsys, ["replay", path, "--at", f"@{live[1]['time'] - 0.01}", "--once",
                            "--json"])
    assert mid["time"] == live[0]["time"] and mid["engines"] == live[0]["engines"]


def test_an_old_fleet_recording_replays_with_a_cold_baseline(prometheus_url, tmp_path, capsys):
    """A recording made before the warm-up was recorded (no ``warmup`` in its header, no
    ``fw`` records) replays: the same rows, the baseline said to start cold."""
    from llmtop.cli.fleet import run_fleet_once
    from llmtop.config import Config, PrometheusConfig
    from llmtop.fleet.record import fleet_header

    cfg = Config(prometheus=PrometheusConfig(url=prometheus_url, window_s=20.0))
    path = str(tmp_path / "old.llrec")
    head = {k: v for k, v in fleet_header(cfg).items() if k != "warmup"}

    class Old(Recorder):
        def record(self, rec: dict) -> None:
            if rec.get("k") != "fw":
                super().record(rec)

    assert run_fleet_once(cfg, as_json=True, recorder=Old(path, cfg, header=head)) == 0
    live = json.loads(capsys.readouterr().out)
    rec = Recording.open(path)
    assert not any(r.get("k") == "fw" for r in rec.records)
    rc, back = _run(capsys, ["replay", path, "--at", f"@{live['time']}", "--once", "--json"])
    assert rc == 0 and back["engines"] == live["engines"] and back["totals"] == live["totals"]
    assert back["baseline"]["points"] == 0 and "holds no warm-up answers" in \
        back["baseline"]["error"]
    assert "the baseline starts cold" in back["baseline"]["note"]
    assert main(["replay", path, "--at", f"@{live['time']}", "--once"]) == 0  # the table
    assert "the baseline starts cold" in capsys.readouterr().out


def test_fleet_and_direct_recordings_do_not_mix(tmp_path):
    from llmtop.cli.fleet import fleet_recorder
    from llmtop.config import Config, PrometheusConfig

    path = str(tmp_path / "direct.llrec")
    Recorder(path, Config()).close()
    cfg = Config(prometheus=PrometheusConfig(url="http://u:secret@127.0.0.1:9/"))
    with pytest.raises(RecordingError, match="another mode"):
        fleet_recorder(cfg, path)
    fresh = str(tmp_path / "fleet.llrec")
    fleet_recorder(cfg, fresh).close()
    rec = Recording.open(fresh)
    assert "secret" not in json.dumps(rec.header)  # no credentials in the header
    assert rec.header["prometheus"]["url"] == "http://127.0.0.1:9"


def test_a_fleet_recording_plays_in_the_fleet_tui(tmp_path):
    import asyncio

    from llmtop.cli.fleet import fleet_recorder, run_fleet_once, tui_config
    from llmtop.config import Config, PrometheusConfig
    from llmtop.fleet.replay import FleetReplay
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.source import FleetSource
    from llmtop.ui.textshot import screen_lines

    from .test_bad_input import _server

    path = str(tmp_path / "fleet.llrec")
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
    import io

    assert run_fleet_once(cfg, out=io.StringIO(), transport=_server(),
                          recorder=fleet_recorder(cfg, path)) == 0
    replay = FleetReplay(Recording.open(path))

    async def go():
        app = LlmtopApp(FleetSource(replay), tui_config(replay.config))
        async with app.run_test(size=(140, 24)) as pilot:
            await pilot.pause(0.5)
            return screen_lines(app)

    lines = asyncio.run(go())
    assert "REPLAY fleet.llrec" in lines[0]
    assert " AT " in lines[0] and "LIVE" not in lines[0]
    assert any(":8000" in line for line in lines[1:])
