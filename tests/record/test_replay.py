"""Replay runs the live derivation: identical snapshots, seeking, playback controls."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from llmtop.config import Config, Target
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import ReplaySource, parse_when, snapshot_at
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase
from tests.record.test_delta import _bump

TARGET = Target(name="vllm@127.0.0.1:9", base_url="http://127.0.0.1:9", engine="vllm",
                host="127.0.0.1", port=9)
CONFIG = Config(targets=(TARGET,), discover=False)
BASE = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")


class FakeScraper(FakeScraperBase):
    """Serves the real vLLM capture with counters advancing like a live server."""

    def __init__(self, t0: float = 1_800_000_000.0) -> None:
        self.n = 0
        self.t0 = t0

    async def scrape(self, target: Target) -> RawScrape:
        self.n += 1
        return RawScrape(target=target.name, url=target.base_url + "/metrics",
                         t_wall=self.t0 + self.n, t_mono=100.0 + self.n, status="ok",
                         http_status=200, content_type="text/plain", body=_bump(BASE, self.n),
                         engine_hint="vllm")

    async def identify(self, target: Target) -> dict:
        return {"version": "0.32.0", "host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


async def _live(path, ticks: int) -> list[dict]:
    rec = Recorder(path, CONFIG)
    mon = RecordingMonitor(Monitor(CONFIG, scraper=FakeScraper()), rec)
    outs = []
    prev = None
    for _ in range(ticks):
        await mon.tick()
        now = mon.store.now_mono
        if prev is not None:
            snap = mon.store.snapshot(round(now - prev, 3))
            outs.append(json.loads(snapshot_json(snap)))
        prev = now
    await mon.aclose()
    return outs


def test_two_tick_once_replays_identically(tmp_path):
    path = tmp_path / "once.llrec"
    (live,) = asyncio.run(_live(path, 2))
    rec = Recording.open(path)
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    assert replayed == live
    row = live["engines"][0]
    assert row["generation_tokens_per_s"] is not None and row["running"] == 8


def test_replay_at_any_recorded_moment(tmp_path):
    path = tmp_path / "r.llrec"
    asyncio.run(_live(path, 8))
    rec = Recording.open(path)
    ticks = [r["w"] for r in rec.records if r["k"] == "tick"]
    a = snapshot_at(rec, ticks[5], 3.0)
    assert a.time == ticks[5] and a.window_s == 3.0


def test_replay_source_plays_and_seeks(tmp_path):
    path = tmp_path / "r.llrec"
    asyncio.run(_live(path, 20))
    rec = Recording.open(path)
    clock = [0.0]
    src = ReplaySource(rec, clock=lambda: clock[0])
    snap = asyncio.run(src.tick())
    assert src.position_wall == rec.start
    clock[0] = 5.0
    src.set_speed(1.0)
    snap = asyncio.run(src.tick())
    assert src.position_wall == pytest.approx(rec.start + 5.0)
    assert snap.engines and snap.engines[0].state in ("ok", "restarted")
    src.toggle_play()
    clock[0] = 50.0
    asyncio.run(src.tick())
    assert src.position_wall == pytest.approx(rec.start + 5.0)  # paused
    src.step(1)
    assert src.position_wall == pytest.approx(rec.start + 6.0)
    src.step(-2)
    assert src.position_wall == pytest.approx(rec.start + 4.0)
    src.jump(60)
    assert src.position_wall == rec.end
    assert src.seek("+3") is None and src.position_wall == rec.end  # clamped at the end
    assert src.seek("2") is None and src.position_wall == pytest.approx(rec.start + 2.0)
    assert "cannot read" in src.seek("soon")
    hhmm = time.strftime("%H:%M:%S", time.localtime(rec.start + 7))
    assert src.seek(hhmm) is None and src.position_wall == pytest.approx(rec.start + 7)
    assert src.store.snapshot(10.0).engines[0].generation_tokens_per_s is not None


def test_parse_when_rejects_times_outside(tmp_path):
    path = tmp_path / "r.llrec"
    asyncio.run(_live(path, 3))
    rec = Recording.open(path)
    outside = time.strftime("%H:%M", time.localtime(rec.start - 7200))
    with pytest.raises(ValueError, match="outside the recording"):
        parse_when(outside, rec)
    assert parse_when("1m", rec) == rec.start + 60
    assert parse_when("-1", rec, position=rec.start + 2) == rec.start + 1


def test_identity_from_first_contact_survives_a_late_start(tmp_path, monkeypatch):
    """Identity (engine version) is recorded once; replaying from later keeps it."""
    import llmtop.record.replay as replay

    monkeypatch.setattr(replay, "LOOKBACK_S", 2.0)  # rebuilds start after first contact
    path = tmp_path / "r.llrec"
    asyncio.run(_live(path, 12))
    rec = Recording.open(path)
    assert sum(1 for r in rec.records if r.get("id")) == 1  # recorded on first contact only
    assert snapshot_at(rec, rec.end, 1.0).engines[0].engine_version == "0.32.0"
    src = ReplaySource(rec)
    asyncio.run(src.tick())
    src.jump(1000)
    src.seek("8")  # backwards: the store is rebuilt from 6 s in, after the identity
    assert src.store.snapshot(10.0).engines[0].engine_version == "0.32.0"


def test_the_recording_carries_the_capacity_profile_its_replay_shows(tmp_path, monkeypatch):
    from llmtop.capacity import Profile, load_profiles, save_profile

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    model = BASE.split('model_name="', 1)[1].split('"', 1)[0]
    mine = Profile(url=TARGET.base_url, requests_per_s=2.0, output_tokens_per_s=100.0,
                   measured_unix=time.time() - 60, model=model, engine="vllm",
                   slo={"ttft": 0.5}, shape={"prompt_mean": 200.0})
    other = Profile(url="http://127.0.0.1:8001", requests_per_s=9.0, output_tokens_per_s=None,
                    measured_unix=time.time(), model=model)
    for p in (mine, other):
        save_profile(p)
    path = tmp_path / "cap.llrec"
    (live,) = asyncio.run(_live(path, 2))
    rec = Recording.open(path)
    # only the recorded engine's profile travels, as it was
    assert [d["url"] for d in rec.header["capacity"]] == [TARGET.base_url]
    for f in (tmp_path / "state").rglob("*.json"):
        f.unlink()  # replayed on another machine: no profile saved there
    assert load_profiles() == []
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    row, live_row = replayed["engines"][0], live["engines"][0]
    assert live_row["capacity"]["requests_per_s"] == 2.0
    assert row["capacity"]["requests_per_s"] == 2.0
    assert row["capacity_used"] == live_row["capacity_used"] is not None
    # a newer probe saved here does not rewrite what the recording showed
    save_profile(Profile(url=TARGET.base_url, requests_per_s=8.0, output_tokens_per_s=None,
                         measured_unix=time.time(), model=model))
    again = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    assert again["engines"][0]["capacity"]["requests_per_s"] == 2.0


def test_an_old_recording_without_profiles_uses_this_machines(tmp_path, monkeypatch):
    from llmtop.capacity import Profile, save_profile

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "old.llrec"
    (live,) = asyncio.run(_live(path, 2))
    rec = Recording.open(path)
    assert "capacity" not in rec.header and live["engines"][0]["capacity"] is None
    model = BASE.split('model_name="', 1)[1].split('"', 1)[0]
    save_profile(Profile(url=TARGET.base_url, requests_per_s=4.0, output_tokens_per_s=None,
                         measured_unix=time.time(), model=model))
    replayed = json.loads(snapshot_json(snapshot_at(rec, rec.end, live["window_s"])))
    assert replayed["engines"][0]["capacity"]["requests_per_s"] == 4.0


def test_once_at_a_moment_keeps_a_target_not_asked_in_its_two_ticks(tmp_path):
    """A dead router backend backs off: the two ticks ``--at`` reads may hold no answer of
    it. Its latest earlier answer stands, as the live store still holds it (not dropped)."""
    dead = Target(name="127.0.0.1:19", base_url="http://127.0.0.1:19", engine="vllm",
                  host="127.0.0.1", port=19)
    path = tmp_path / "backoff.llmtop"
    rec = Recorder(path, Config(targets=(TARGET, dead), discover=False))
    for n in range(1, 7):
        t_wall, t_mono = 1_800_000_000.0 + n, 100.0 + n
        rec(RawScrape(target=TARGET.name, url=TARGET.base_url + "/metrics", t_wall=t_wall,
                      t_mono=t_mono, status="ok", http_status=200, content_type="text/plain",
                      body=_bump(BASE, n), engine_hint="vllm"))
        if n in (1, 2):  # asked twice, then backing off: not asked in ticks 3-6
            rec(RawScrape(target=dead.name, url=dead.base_url + "/metrics", t_wall=t_wall,
                          t_mono=t_mono, status="down", error="connection refused"))
        rec.tick(t_mono, t_wall)
    rec.close()
    snap = snapshot_at(Recording.open(path), 1_800_000_006.0, 1.0)
    states = {r.target: (r.state, r.error) for r in snap.engines}
    assert states == {TARGET.name: ("ok", None), dead.name: ("down", "connection refused")}
