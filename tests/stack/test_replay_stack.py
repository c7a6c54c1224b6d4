"""Record and replay reproduce routers, their backends, roles and the stack findings: a
router is scraped raw like an engine, its backends become targets and are recorded too."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json

from llmtop.cli.record import replay_main
from llmtop.config import Config, Target
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import RecordingMonitor
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import diagnosis_at, snapshot_at
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase

from .build import engine_pair, scaled

ROUTER = Target(name="router", base_url="http://127.0.0.1:29000", host="127.0.0.1", port=29000)
CONFIG = Config(targets=(ROUTER,), discover=False)
T0 = 1_800_000_000.0


class StackScraper(FakeScraperBase):
    """A vLLM router (fixture) in front of two real vLLM captures: ``127.0.0.1:8001``
    moves on (calm a, b, a, b... with counters advancing), ``127.0.0.1:8002`` holds 2 running
    and 10 waiting and makes no token (stuck)."""

    def __init__(self) -> None:
        self.tick = 0
        self.router = fixture_text("routers/vllm-router-SYNTHETIC-metrics-rs.txt")
        self.calm = engine_pair("calm")
        self.stuck = engine_pair("queueing")[0]

    async def scrape(self, target: Target) -> RawScrape:
        if target.name == "router":
            self.tick += 1
        n = self.tick
        if target.name == "router":
            body = scaled(self.router, float(n))
        elif target.name.endswith(":8001"):
            body = scaled(self.calm[n % 2], 1.0 + n)
        else:
            body = self.stuck
        return RawScrape(target=target.name, url=target.base_url + "/metrics",
                         t_wall=T0 + n, t_mono=100.0 + n, status="ok", http_status=200,
                         content_type="text/plain", body=body)

    async def identify(self, target: Target) -> dict:
        return {"host": "127.0.0.1"}

    async def aclose(self) -> None:
        return None


async def _live(path, ticks):
    mon = RecordingMonitor(Monitor(CONFIG, scraper=StackScraper()), Recorder(path, CONFIG))
    for _ in range(ticks):
        await mon.tick()
    snap = mon.store.snapshot(3.0)
    live = json.loads(snapshot_json(snap))
    findings = [f.rule for f in mon.store.diagnoser.findings]
    await mon.aclose()
    return live, findings


def test_replay_reproduces_routers_backends_roles_and_findings(tmp_path):
    path = tmp_path / "stack.llrec"
    live, live_rules = asyncio.run(_live(path, 26))
    [r] = live["routers"]
    assert {b["target"] for b in r["backends"]} == {"127.0.0.1:8001", "127.0.0.1:8002"}
    assert all(e["router"] == "router" for e in live["engines"])
    assert "stuck" in live_rules

    rec = Recording.open(path)
    again = json.loads(snapshot_json(snapshot_at(rec, rec.end, 3.0)))
    assert again["routers"] == live["routers"]
    assert [(e["target"], e["router"], e["role"]) for e in again["engines"]] == [
        (e["target"], e["router"], e["role"]) for e in live["engines"]]
    found = diagnosis_at(rec, rec.end)
    stuck = [f for f in found if f.rule == "stuck"]
    assert [f.target for f in stuck] == ["127.0.0.1:8002"]

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert replay_main([str(path), "--at", f"@{rec.end}", "--once", "--json",
                            "--window", "3"]) == 0
    doc = json.loads(out.getvalue())
    assert doc["routers"] == live["routers"]
    assert "stuck" in {f["rule"] for f in doc["diagnosis"]}
