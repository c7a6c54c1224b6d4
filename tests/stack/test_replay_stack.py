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
    findings = [_said(f) for f in mon.store.diagnoser.findings]
    await mon.aclose()
    return live, findings


def _said(f) -> tuple[str, str | None, str, str]:
    """A finding as the replay must say it again: rule, target, severity, summary."""
    if isinstance(f, dict):
        return f["rule"], f["target"], f["severity"], f["summary"]
    return f.rule, f.target, f.severity, f.summary


STACK_FINDINGS = {
    # the stuck engine: no token while it holds requests (no health path in a recording)
    ("stuck", "127.0.0.1:8002", "critical"): ["no token generated for", "2 running, 10 waiting",
                                              "/health not checked"],
    # the router keeps sending it its turn while its sibling has room
    ("routing", "127.0.0.1:8002", "warn"): ["policy round_robin", "50 % of the requests",
                                            "127.0.0.1:8001 has room"],
    # its queue, all window long
    ("queueing", "127.0.0.1:8002", "warn"): ["10 requests wait"],
}
"""The stack findings the live monitor makes over these scrapes, with words each must say."""


def _check_stack_findings(found: list[tuple[str, str | None, str, str]]) -> None:
    by_key = {(rule, target, sev): summary for rule, target, sev, summary in found}
    for key, words in STACK_FINDINGS.items():
        assert key in by_key, (key, found)
        assert all(w in by_key[key] for w in words), (words, by_key[key])


def test_replay_reproduces_routers_backends_roles_and_findings(tmp_path):
    path = tmp_path / "stack.llrec"
    live, live_rules = asyncio.run(_live(path, 26))
    [r] = live["routers"]
    assert {b["target"] for b in r["backends"]} == {"127.0.0.1:8001", "127.0.0.1:8002"}
    assert all(e["router"] == "router" for e in live["engines"])
    _check_stack_findings(live_rules)

    rec = Recording.open(path)
    again = json.loads(snapshot_json(snapshot_at(rec, rec.end, 3.0)))
    assert again["routers"] == live["routers"]
    assert [(e["target"], e["router"], e["role"]) for e in again["engines"]] == [
        (e["target"], e["router"], e["role"]) for e in live["engines"]]
    found = [_said(f) for f in diagnosis_at(rec, rec.end)]
    assert found == live_rules  # every finding, said the same way
    _check_stack_findings(found)

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert replay_main([str(path), "--at", f"@{rec.end}", "--once", "--json",
                            "--window", "3"]) == 0
    doc = json.loads(out.getvalue())
    assert doc["routers"] == live["routers"]
    assert [_said(f) for f in doc["diagnosis"]] == live_rules
