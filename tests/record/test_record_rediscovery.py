"""``llmtop record`` without a TARGET keeps searching: an engine found during the recording
is recorded from then on, and replay shows it beside the engines found at the start."""

from __future__ import annotations

import asyncio
import json

from llmtop.cli import record as record_cli
from llmtop.config import Config, Target
from llmtop.discovery import Rediscovery
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import snapshot_at
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase

FIRST = Target(name="127.0.0.1:8001", base_url="http://127.0.0.1:8001", port=8001)
LATER = Target(name="127.0.0.1:8002", base_url="http://127.0.0.1:8002", port=8002)
T0 = 1_800_000_000.0
BODY = fixture_text("metrics/vllm-real-cpu-v0.32.0-under-load.txt")


class Scraper(FakeScraperBase):
    """Both engines answer the same real vLLM capture; time advances one second a tick (the
    first engine is scraped every tick)."""

    def __init__(self) -> None:
        self.n = 0

    async def scrape(self, target: Target) -> RawScrape:
        self.n += target.name == FIRST.name
        n = self.n
        return RawScrape(target=target.name, url=target.base_url + "/metrics",
                         t_wall=T0 + n, t_mono=100.0 + n, status="ok", http_status=200,
                         content_type="text/plain", body=BODY)

    async def identify(self, target: Target) -> dict:
        return {"host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


async def _record(path) -> list[str]:
    config = Config(targets=(FIRST,), discover=True)
    searches = [0]

    async def find(_config):
        searches[0] += 1
        return [FIRST, LATER] if searches[0] >= 3 else [FIRST]  # the third search finds it

    clock = [0.0]
    rd = Rediscovery(config, every_s=1.0, find=find, clock=lambda: clock[0])
    rd.mark_searched()
    mon = RecordingMonitor(Monitor(config, scraper=Scraper(), rediscover=rd),
                           Recorder(path, config))
    for _ in range(8):
        clock[0] += 1.0
        await mon.tick()
        await asyncio.sleep(0)  # the background search finishes between ticks
    names = [t.name for t in mon.monitor.targets]
    await mon.aclose()
    return names


def test_an_engine_found_during_the_recording_is_recorded_and_replayed(tmp_path):
    path = tmp_path / "found.llrec"
    names = asyncio.run(_record(path))
    assert names == [FIRST.name, LATER.name]
    rec = Recording.open(path)
    scraped = {r["t"] for r in rec.records if r["k"] == "s"}
    assert scraped == {FIRST.name, LATER.name}
    doc = json.loads(snapshot_json(snapshot_at(rec, rec.end, 3.0)))
    assert sorted(e["target"] for e in doc["engines"]) == [FIRST.name, LATER.name]
    assert all(e["state"] == "ok" for e in doc["engines"])


def test_record_without_a_target_keeps_searching(monkeypatch, tmp_path):
    """The CLI path: no TARGET -> the monitor gets a rediscovery (the search just made
    counts as its first); a TARGET given -> no search at all."""
    made: list[bool] = []

    async def discover(config, notes=None):
        return [FIRST]

    def from_config(config, demo=None, *, sink=None, store=None, rediscover=False,
                    receiver=None):
        made.append(rediscover)
        raise SystemExit(0)  # enough: the choice is made

    monkeypatch.setattr("llmtop.discovery.search.discover", discover)
    monkeypatch.setattr(Monitor, "from_config", staticmethod(from_config))
    for targets in ((), (FIRST,)):
        config = Config(targets=targets, discover=True)
        try:
            asyncio.run(record_cli._record(config, str(tmp_path / "r.llrec"), None, None,
                                           None, None))
        except SystemExit:
            pass
    assert made == [True, False]
