"""The real vLLM's engine core killed: ``DOWN`` carries vLLM's own EngineDeadError line, live
and in the replay of what was recorded.

- The monitor is built as the TUI builds it with no target (``Monitor.from_config(Config(),
  rediscover=True)``, recorded with ``record.live.attach`` as ``--record`` does): it finds
  the server started by ``scripts/real_vllm/serve.sh`` by its process and follows its output
  file, until the row is ``ok``.
- The server's ``VLLM::EngineCore`` child is killed with SIGKILL while it serves streamed
  requests. The real API server then logs the ``EngineDeadError`` traceback (its output
  handler's, then one per request), exits, and writes lines that explain nothing after it
  (``INFO: Shutting down``, ``nanobind: leaked ...``).
- Live: the row turns ``down`` and its reason (the detail, ``--once`` and the event log show
  it) is the EngineDeadError line, never a later line; ``--once --json`` has it as
  ``log.last_error``.
- The next morning: ``llmtop replay FILE --at @T --once --json`` at a moment after ``DOWN``
  shows the same row ``down`` with the same line; so does the TUI's replay sought there (the
  event log's ``DOWN: log: ...`` line, the engine detail's state), at 80x24.

It kills the server it is given, so it must be its last user: ``.ci/run`` runs it after the
other tests of that server, in a step of its own, with ``LLMTOP_REAL_VLLM_STATE`` (the state
folder of ``serve.sh``: ``url``, ``pid``, ``server.log``). Without it the test skips.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from llmtop.config import Config
from llmtop.console.once_table import print_once
from llmtop.model import Event, Snapshot
from llmtop.monitor import Monitor
from llmtop.once import snapshot_json
from llmtop.record.live import attach
from tests.real_engine.servers import need_env

pytestmark = pytest.mark.real_engine

DEAD = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue"
"""The start of the line that explains the state (the traceback's exception line)."""
READY_S = 60.0
"""How long the monitor may take to find the server, scrape it ``ok`` and follow its log."""
DOWN_S = 90.0
"""How long the API server may take to notice its engine core died and exit."""
STREAMS = 8
"""Streamed requests in flight when the engine core dies (``--max-num-seqs 8``): the API
server then logs the EngineDeadError once more for each, after its own."""
TAIL_S = 20.0
"""How long the follower may take to read the lines the server wrote as it exited."""


def _engine_core(pid: int) -> int | None:
    """The child of ``pid`` that vLLM names ``VLLM::EngineCore`` (its process title)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(b"VLLM::EngineCore"):
                return int(kid)
    return None


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie not yet reaped by its parent counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].startswith("Z")


def _read(snap: Snapshot, target: str, text: str) -> bool:
    """True when the monitor has read a log line of ``target`` holding ``text``."""
    return any(text in line for e in snap.log_events.get(target, ()) for line in e.lines)


async def _tui(recording: Path, at: float, port: int) -> tuple[list[str], list[str]]:
    """The TUI's replay of ``recording`` sought to ``at``, at 80x24: the overview's lines,
    then the engine detail's of the row on ``port`` (other engines found on this machine
    are in the recording too)."""
    from llmtop.record.reader import Recording
    from llmtop.record.replay import ReplaySource
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.source import MonitorSource
    from llmtop.ui.textshot import screen_lines

    src = ReplaySource(Recording.open(recording))
    assert src.seek(f"@{at:.3f}") is None
    src.playing = False
    app = LlmtopApp(MonitorSource(src, host="replay"), Config(interval_s=1.0), autopoll=False)
    async with app.run_test(size=(80, 24)) as pilot:

        async def shot() -> list[str]:
            await pilot.pause()
            app.paint()
            await pilot.pause()
            return screen_lines(app)

        await app.poll_once()
        overview = await shot()
        head = next(i for i, x in enumerate(overview) if "ENGINE" in x and "STATE" in x)
        mine = next(i for i, x in enumerate(overview[head + 1:]) if f":{port} " in x)
        await pilot.press(*["down"] * mine, "enter")
        return overview, await shot()


def _row(snap: Snapshot, port: int):
    rows = [r for r in snap.engines if r.target.endswith(f":{port}")]
    return rows[0] if rows else None


async def _until(mon, port: int, limit_s: float, tick_s: float, ok, what: str):
    """Tick as the TUI does (one a refresh) until the row on ``port`` passes ``ok``; the
    snapshot and the row."""
    deadline = time.monotonic() + limit_s
    while True:
        snap = await mon.tick()
        row = _row(snap, port)
        if row is not None and ok(row):
            return snap, row
        assert time.monotonic() < deadline, f"not {what} in {limit_s:.0f} s: {row}"
        await asyncio.sleep(tick_s)


async def _stream(client: httpx.AsyncClient, url: str, i: int) -> str:
    """One long streamed completion; what the client got (a status and the chunks read, or
    the error), never an exception: the engine dies under it."""
    try:
        async with client.stream("POST", f"{url}/v1/completions", json={
                "model": "tiny-llama", "prompt": f"request {i}", "max_tokens": 1000,
                "ignore_eos": True, "stream": True}) as r:
            n = 0
            async for _ in r.aiter_lines():
                n += 1
            return f"{r.status_code} after {n} lines"
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}"


def test_killed_engine_core_is_down_with_its_enginedead_line_live_and_replayed(
        tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user theme in the TUI
    state = Path(need_env("LLMTOP_REAL_VLLM_STATE", "serve.sh's STATE folder; the test kills "
                                                     "that server's engine core"))
    url = (state / "url").read_text().strip()
    pid = int((state / "pid").read_text())
    log = os.path.realpath(state / "server.log")
    port = urlsplit(url).port
    assert port is not None and not _gone(pid), f"the vLLM of {state} is not running"
    recording = tmp_path / "dead.llrec"

    async def go() -> tuple[Snapshot, list[Event], list[str | None]]:
        config = Config()
        tick_s = config.interval_s
        mon = attach(Monitor.from_config(config, rediscover=True), str(recording), config)
        try:
            snap, row = await _until(mon, port, READY_S, tick_s, lambda r: (
                r.state == "ok" and r.log is not None and r.log.location is not None
                and r.log.location.path == log), "ok with its log followed")
            async with httpx.AsyncClient(timeout=DOWN_S) as client:  # requests in flight
                streams = [asyncio.create_task(_stream(client, url, i)) for i in range(STREAMS)]
                try:
                    await _until(mon, port, READY_S, tick_s, lambda r: bool(r.running),
                                 "running requests")
                    core = _engine_core(pid)
                    assert core is not None, f"no VLLM::EngineCore child under {pid}"
                    os.kill(core, signal.SIGKILL)
                    killed = time.monotonic()
                    snap, row = await _until(mon, port, DOWN_S, tick_s,
                                             lambda r: r.state == "down", "down")
                    print(f"down {time.monotonic() - killed:.1f} s after the SIGKILL: "
                          f"{row.error}")
                finally:
                    await asyncio.wait(streams, timeout=DOWN_S)
            print(f"the clients got: {[t.result() for t in streams if t.done()]}")
            downs = [row.error]
            deadline = time.monotonic() + TAIL_S
            while not _read(snap, row.target, "nanobind: leaked"):  # the lines after it
                assert time.monotonic() < deadline, f"no nanobind line read in {TAIL_S:.0f} s"
                await asyncio.sleep(tick_s)
                snap = await mon.tick()
                downs.append(getattr(_row(snap, port), "error", None))
            for _ in range(3):  # and a few refreshes more: the row keeps its line
                await asyncio.sleep(tick_s)
                snap = await mon.tick()
                downs.append(getattr(_row(snap, port), "error", None))
            print(f"the row's reason at each refresh after DOWN: {downs}")
            return snap, list(mon.store.events), downs
        finally:
            await mon.aclose()  # closes the recording too

    snap, events, downs = asyncio.run(go())
    assert _gone(pid), "the API server still runs with its engine core killed"
    text = Path(log).read_text(encoding="utf-8", errors="replace")
    after = text[text.rindex(DEAD):]  # what the server wrote after the line that explains
    assert "INFO:     Shutting down" in after and "nanobind: leaked" in after, after[-2000:]

    row = _row(snap, port)
    assert row is not None and row.state == "down", row
    dead = [e for e in snap.log_events[row.target] if e.headline.startswith(DEAD)]
    assert len(dead) > 1, [e.lines[0] for e in dead]  # the output handler's, the requests'
    assert downs[1:] == downs[:-1], downs  # the same line from the first DOWN refresh on
    assert row.error is not None and row.error.startswith(f"log: {DEAD}"), row.error
    assert "Shutting down" not in row.error and "nanobind" not in row.error, row.error
    headline = row.error.removeprefix("log: ").split(" (")[0]
    mine = [e.text for e in events if e.target == row.target]
    assert f"DOWN: {row.error}" in mine or f"DOWN \u2014 log: {headline}" in mine, mine

    table = io.StringIO()  # what --once prints
    print_once(snap, file=table)
    assert f"{row.target}: DOWN \u2014 log: {DEAD}" in table.getvalue(), table.getvalue()
    doc = json.loads(snapshot_json(snap))  # what --once --json prints
    (live,) = [e for e in doc["engines"] if e["target"] == row.target]
    assert live["state"] == "down" and live["error"] == row.error, live
    assert live["log"]["last_error"]["headline"].startswith(DEAD), live["log"]
    assert live["log"]["source"]["path"] == log, live["log"]

    done = subprocess.run(  # the next morning: the recording at a moment after DOWN
        [sys.executable, "-m", "llmtop", "replay", str(recording), "--at",
         f"@{snap.time + 0.5:.3f}", "--once", "--json"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    replayed = [e for e in json.loads(done.stdout)["engines"] if e["target"] == row.target]
    assert len(replayed) == 1, done.stdout[:2000]
    assert replayed[0]["state"] == "down", replayed[0]
    assert replayed[0]["error"] == row.error, (replayed[0]["error"], row.error)
    assert replayed[0]["log"]["last_error"]["headline"].startswith(DEAD), replayed[0]["log"]

    overview, detail = asyncio.run(_tui(recording, snap.time + 0.5, port))  # and in the TUI
    assert any("DOWN: log: vllm.v1.engine.exceptions.EngineDead" in x for x in overview), \
        "\n".join(overview)
    text = " ".join(" ".join(detail).split())
    assert f"{urlsplit(url).netloc} tiny-llama DOWN log: {DEAD}" in text, "\n".join(detail)
