"""Replay of a fleet recording backfills a row's sparklines from the recording itself
(``FleetReplay.history``): the recorded refreshes up to the one shown, rebuilt by the row
builder; nothing after it; again after a seek, forwards or back."""

from __future__ import annotations

import asyncio

import pytest

from llmtop.cli.fleet import fleet_recorder
from llmtop.config import Config, PrometheusConfig
from llmtop.fleet.monitor import FleetMonitor
from llmtop.fleet.replay import FleetReplay, fleet_snapshot_at
from llmtop.record.reader import Recording
from llmtop.ui.source import FleetSource

from .test_fleet_detail_windows import INSTANCES, T0, fake_prometheus, gen_rate, running

KEY = f"{INSTANCES[0]}|m"
N = 5
TIMES = [T0 + 10 * i for i in range(N)]


@pytest.fixture
def recording(tmp_path) -> Recording:
    """Five live refreshes, 10 s apart, of a server whose values name their time."""
    path = str(tmp_path / "fleet.llrec")
    cfg = Config(prometheus=PrometheusConfig(url="http://127.0.0.1:9090"))
    now = [T0 + 3]
    rec = fleet_recorder(cfg, path)

    async def go():
        mon = FleetMonitor(cfg, transport=fake_prometheus([]), clock=lambda: now[0])
        mon.sink = rec.record
        for _ in range(N):
            snap = await mon.tick()
            assert mon.error is None and snap.engines
            now[0] += 10
        await mon.aclose()

    asyncio.run(go())
    rec.close()
    return Recording.open(path)


def _replay(rec: Recording, at: float) -> FleetReplay:
    return FleetReplay(rec, at, clock=lambda: 0.0)  # the playback position stays put


def test_history_is_the_recorded_rows_up_to_the_shown_refresh(recording):
    replay = _replay(recording, TIMES[2])

    async def go():
        snap = await replay.tick()
        return snap, await replay.history(KEY, 90), await replay.history(KEY, 2)

    snap, past, last_two = asyncio.run(go())
    assert snap.time == TIMES[2]
    assert [t for t, _ in past] == TIMES[:3]  # nothing after the position
    assert [t for t, _ in last_two] == TIMES[1:3]
    for t, row in past:
        assert row is not None and row.key == KEY
        live = next(r for r in fleet_snapshot_at(recording, t)[1].engines if r.key == KEY)
        assert row.running == live.running == running(INSTANCES[0], t)
        assert row.generation_tokens_per_s == pytest.approx(gen_rate(INSTANCES[0], 60, t))
        assert row.generation_tokens_per_s == live.generation_tokens_per_s
        assert row.ttft_s == live.ttft_s and row.ttft_s is not None


def test_history_of_an_unknown_row_is_empty(recording):
    replay = _replay(recording, TIMES[1])
    asyncio.run(replay.tick())
    assert asyncio.run(replay.history("nowhere:1|m", 90)) == []


async def _sparkline(src: FleetSource, field: str = "running") -> list[float | None]:
    """The sparkline panel's first read starts the backfill; its values once done."""
    src.series(KEY, "ttft_p50", 30)
    task = src._backfill_task
    assert task is not None
    await task
    return src.series(KEY, field)


def test_fleet_source_sparklines_start_full_and_again_after_a_seek(recording):
    src = FleetSource(_replay(recording, TIMES[2]))

    async def go():
        await src.tick()
        opened = (await _sparkline(src), src.series_times(), await _sparkline(src, "gen_tps"))
        assert src.travel(f"{TIMES[4]:.3f}") is None  # T: a seek forwards
        await src.tick()
        forwards = (await _sparkline(src), src.series_times())
        assert src.travel(f"{TIMES[1]:.3f}") is None  # and back: rebuilt from the same records
        await src.tick()
        back = (await _sparkline(src), src.series_times())
        return opened, forwards, back

    opened, forwards, back = asyncio.run(go())
    run0 = [running(INSTANCES[0], t) for t in TIMES]
    assert opened[0] == run0[:3] and opened[1] == TIMES[:3]
    assert opened[2] == pytest.approx([gen_rate(INSTANCES[0], 60, t) for t in TIMES[:3]])
    assert forwards == (run0, TIMES)
    assert back == (run0[:2], TIMES[:2])


def test_a_shown_refresh_rebuilt_twice_is_the_same(recording):
    """The row builder takes its input apart; a seek back rebuilds a record already shown."""
    first = fleet_snapshot_at(recording, TIMES[3])[1]
    again = fleet_snapshot_at(recording, TIMES[3])[1]
    assert [r.key for r in first.engines] and first.engines == again.engines


def test_replay_detail_windows_are_the_recorded_one_only(recording):
    replay = _replay(recording, TIMES[2])
    snap = asyncio.run(replay.tick())
    got = asyncio.run(replay.row_windows(KEY, (10.0, 60.0, 300.0)))
    assert got[60.0] is next(r for r in snap.engines if r.key == KEY)
    assert got[10.0] is None and got[300.0] is None
    assert "not recorded" in (replay.window_note(300.0) or "")
    assert "2 \u00d7 scrape interval 10 s" in (replay.window_note(10.0) or "")
    assert replay.window_note(60.0) is None
