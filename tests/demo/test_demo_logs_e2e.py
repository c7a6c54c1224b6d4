"""End to end: ``start_demo`` and ``Monitor.from_config`` (what ``llmtop --demo`` runs) follow
the demo engines' logs: the calm demo's logs carry no error, the ``down`` fault's DOWN carries
vLLM's EngineDeadError line, live and in the replay of its recording; ``--no-logs`` follows
nothing."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest

from llmtop import clock
from llmtop.cli.record import replay_main
from llmtop.config import Config
from llmtop.demo.launcher import start_demo
from llmtop.monitor import Monitor
from llmtop.record.live import RecordingMonitor
from llmtop.record.recorder import Recorder

# the demo engines in real time for several seconds each: the ci_step tier
pytestmark = [pytest.mark.slow, pytest.mark.ci_step]

ENGINE_DEAD = "log: vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue"


async def _ticks(mon, until, seconds: float, interval: float = 0.5):
    """Tick ``mon`` every ``interval`` s until ``until(snapshot)`` or ``seconds`` pass."""
    snap = None
    t_end = clock.monotonic() + seconds
    while clock.monotonic() < t_end:
        snap = await mon.tick()
        if until(snap):
            return snap
        await clock.sleep(interval)
    return snap


def test_calm_demo_logs_are_followed_and_raise_no_alarm():
    """Every engine's row names its log (the file its engine writes); vLLM's and SGLang's
    lines arrive (access lines, statistics); no engine's log has an error, so the overview
    shows no unread-errors mark (``LogSummary.new_errors`` 0)."""
    demo = start_demo()
    try:
        logs = {t.name: t.log for t in demo.targets}
        assert all(p and Path(p).is_file() for p in logs.values()), logs

        async def run():
            config = demo.apply(Config(interval_s=0.5, discover=False))
            mon = Monitor.from_config(config, demo)
            try:
                def seen(snap):
                    rows = {r.engine: r for r in snap.engines}
                    return len(rows) == 3 and all(
                        r.log is not None and sum(r.log.counts.values()) > 5
                        for k, r in rows.items() if k != "triton")
                t_min = clock.monotonic() + 3.0  # three seconds of SGLang's batch lines
                return await _ticks(mon, lambda s: seen(s) and clock.monotonic() > t_min,
                                    8.0)
            finally:
                await mon.aclose()

        snap = asyncio.run(run())
        for r in snap.engines:
            assert r.state == "ok", (r.target, r.state, r.error)
            assert r.log is not None and r.log.location is not None, r.target
            assert r.log.location.path == logs[r.target], (r.log.location, logs[r.target])
            assert r.log.location.error is None, r.log.location.error
            assert r.log.location.fmt == r.engine, r.log.location
            assert r.log.new_errors == 0 and r.log.last_error is None, r.log
            assert not r.log.counts.get("error") and not r.log.counts.get("critical"), (
                r.target, r.log.counts)
            if r.engine != "triton":
                assert r.log.counts.get("info", 0) > 5, (r.target, r.log.counts)
    finally:
        demo.stop()


def test_no_logs_follows_nothing():
    demo = start_demo(engines=["vllm"], extra_args=["--no-background"])
    try:
        config = demo.apply(Config(interval_s=0.5, discover=False, logs=False))
        mon = Monitor.from_config(config, demo)

        async def run():
            try:
                await mon.tick()
                await clock.sleep(0.3)
                return await mon.tick()
            finally:
                await mon.aclose()

        snap = asyncio.run(run())
        assert mon.logs is None
        assert all(r.log is None for r in snap.engines)
    finally:
        demo.stop()


def test_down_carries_the_engine_dead_error_live_and_in_replay(tmp_path):
    """The ``down`` fault: the demo vLLM writes the real EngineDeadError burst, then stops
    listening; the row goes DOWN with that line as its reason (not the ``nanobind`` lines
    written after it), and the replay of the recording says the same."""
    path = tmp_path / "down.rec"
    demo = start_demo(scenario="down", engines=["vllm"],
                      extra_args=["--fault-after", "2", "--fault-every", "600"])
    try:
        config = demo.apply(Config(interval_s=0.5, discover=False))

        async def run():
            mon = RecordingMonitor(Monitor.from_config(config, demo), Recorder(path, config))
            try:
                snap = await _ticks(mon, lambda s: any(
                    r.state == "down" and ENGINE_DEAD in (r.error or "") for r in s.engines),
                    12.0)
                # a few ticks more, so the recording holds the DOWN beside its log
                for _ in range(3):
                    await clock.sleep(0.5)
                    await mon.tick()
                return snap
            finally:
                await mon.aclose()

        snap = asyncio.run(run())
    finally:
        demo.stop()
    row = snap.engines[0]
    assert row.state == "down", (row.state, row.error)
    assert ENGINE_DEAD in (row.error or ""), row.error
    assert row.log is not None and row.log.last_error is not None
    assert "nanobind" not in (row.error or "")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert replay_main([str(path), "--at", "end", "--once", "--json"]) == 0
    doc = json.loads(out.getvalue())
    eng = doc["engines"][0]
    assert eng["state"] == "down", eng["state"]
    assert ENGINE_DEAD in json.dumps(eng), {k: eng.get(k) for k in ("state", "error", "log")}
