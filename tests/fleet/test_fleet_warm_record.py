"""A fleet recording keeps the warm-up's answers, so a replay judges on the live baseline
(``llmtop/fleet/record.py`` ``fw`` records, ``llmtop/fleet/replay.py`` ``load_baseline``).

The fake Prometheus of ``test_fleet_warm`` (instant and range answers from one function of
time); a real Prometheus in ``test_record.py``.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

from llmtop.cli.fleet import fleet_recorder, replay_fleet_once
from llmtop.diagnose.thresholds import BASELINE_KEEP_S
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.record import fleet_header
from llmtop.fleet.replay import FleetReplay
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder

from .test_fleet_warm import CALM, SLOW, STEP_S, T0, Fake, _monitor


class _Without:
    """A recorder as llmtop recorded before the warm-up was kept: no ``fw`` records and no
    ``warmup`` in the header (an old recording)."""

    def __init__(self, path: str, mon: FleetMonitor) -> None:
        head = {k: v for k, v in fleet_header(mon.config).items() if k != "warmup"}
        self.rec = Recorder(path, mon.config, header=head)

    def record(self, r: dict[str, Any]) -> None:
        if r.get("k") != "fw":
            self.rec.record(r)

    def close(self) -> None:
        self.rec.close()


def _record(tmp_path: Path, fake: Fake, refreshes: int, *, old: bool = False
            ) -> tuple[FleetMonitor, str, list[list[str]]]:
    """``refreshes`` live refreshes 10 s apart from T0, recorded; the findings after each."""
    mon = _monitor(fake)
    path = str(tmp_path / ("old.llrec" if old else "fleet.llrec"))
    rec: Any = _Without(path, mon) if old else fleet_recorder(mon.config, path)
    mon.sink = rec.record
    seen: list[list[str]] = []

    async def go() -> None:
        try:
            for k in range(refreshes):
                fake.clock = T0 + k * STEP_S
                await mon.tick()
                await mon.warmed()
                seen.append([f"{f.rule}@{f.target}" for f in mon.diagnoser.findings])
        finally:
            await mon.aclose()
            rec.close()

    asyncio.run(go())
    return mon, path, seen


def _once(path: str, at: float) -> dict[str, Any]:
    out = io.StringIO()
    assert replay_fleet_once(Recording.open(path), at, as_json=True, out=out) == 0
    return json.loads(out.getvalue())


def test_replay_once_is_judged_on_the_recorded_warm_up(tmp_path):
    fake = Fake(spike_at=T0 - 30)  # slow since 30 s before the start: the past was calm
    mon, path, seen = _record(tmp_path, fake, 1)
    assert seen == [[f"ttft_rise@{SLOW}"]]  # live: judged on the server's history
    rec = Recording.open(path)
    assert rec.header["warmup"] is True and rec.header["schema"] == 2
    (fw,) = [r for r in rec.records if r.get("k") == "fw"]
    assert fw["w"] == T0 and fw["ans"] and fw["werr"] is None
    assert {k.split("#")[0] for k in fw["ans"]} == {"gauges", "counters", "buckets"}
    live = mon.warmup.to_json(mon.diagnoser.warm_points)
    doc = _once(path, T0)
    assert [(f["rule"], f["target"]) for f in doc["diagnosis"]] == [("ttft_rise", SLOW)]
    base = doc["baseline"]
    assert {k: v for k, v in base.items() if k != "note"} == live
    assert base["points"] >= 3 and "baseline from the server's history" in base["note"]
    # the TUI replay from the start: the same findings, the same evidence
    replay = FleetReplay(Recording.open(path), clock=lambda: 0.0)
    asyncio.run(replay.tick())
    assert [f"{f.rule}@{f.target}" for f in replay.diagnoser.findings] == seen[0]
    ev = {e.signal: e for e in replay.diagnoser.findings[0].evidence}
    assert ev["ttft_p95"].baseline is not None and ev["ttft_p95"].baseline < 0.1


def test_an_old_recording_without_warm_up_answers_replays_cold_and_says_so(tmp_path):
    fake = Fake(spike_at=T0 - 30)
    _mon, path, seen = _record(tmp_path, fake, 1, old=True)
    assert seen == [[f"ttft_rise@{SLOW}"]]  # live had the baseline; the file does not
    rec = Recording.open(path)
    assert "warmup" not in rec.header and not any(r.get("k") == "fw" for r in rec.records)
    doc = _once(path, T0)
    assert doc["engines"] and doc["diagnosis"] == []  # ttft_rise needs a baseline
    base = doc["baseline"]
    assert base["points"] == 0 and base["source"] == "recording"
    assert "holds no warm-up answers" in base["error"]
    assert "the baseline starts cold" in base["note"]


def test_a_seek_loads_the_whole_15_minute_baseline(tmp_path):
    fake = Fake()
    n = 130  # 21.5 min of refreshes, 10 s apart
    mon, path, _seen = _record(tmp_path, fake, n)
    window = mon.window_s
    rec = Recording.open(path)
    key = f"{CALM}|m"
    for at, earliest in ((T0 + (n - 1) * STEP_S, None), (T0 + 120.0, T0)):
        replay = FleetReplay(rec, at=at, clock=lambda: 0.0)
        asyncio.run(replay.tick())
        t = replay.snapshot().time
        b = replay.diagnoser.diagnoser.tracker.baseline(key, t, window)
        assert b is not None
        # from the refreshes of the 15 minutes (not the 5.5 of before), or at 2 min into
        # the recording from its warm-up's points before the first refresh
        assert b.span_s >= BASELINE_KEEP_S - window - 240, (at - T0, b)
        pts = replay.diagnoser.diagnoser.tracker._rows[key].points
        if earliest is not None:
            assert pts[0][0] < earliest  # the recorded warm-up's history
        assert b.span_s <= BASELINE_KEEP_S - window


def test_a_seek_near_the_start_has_the_live_baseline(tmp_path):
    """2 minutes in, the live baseline was the warm-up's points and every refresh since:
    a seek there rebuilds exactly that one (medians and point counts)."""
    mon, path, _seen = _record(tmp_path, Fake(), 13)
    t = T0 + 12 * STEP_S
    replay = FleetReplay(Recording.open(path), at=t, clock=lambda: 0.0)
    asyncio.run(replay.tick())
    for key in (f"{CALM}|m", f"{SLOW}|m"):
        live = mon.diagnoser.diagnoser.tracker.baseline(key, t, mon.window_s)
        back = replay.diagnoser.diagnoser.tracker.baseline(key, t, mon.window_s)
        assert live is not None and back == live
