"""The real vLLM 0.32 EngineDeadError burst (captured by the log parser's branch into
``tests/fixtures/logs/``), through the real parser, ``Store.add_log`` and a DOWN: the row's
reason and the event log carry the EngineDeadError line, not the shutdown and nanobind lines
written after it, live and after a record -> replay round trip. Skipped until the fixture is
in the tree (it lands with the parser)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmtop.config import Config, Target
from llmtop.history.logs import headline_text, is_error
from llmtop.history.store import Store
from llmtop.model import RawLog, RawScrape
from llmtop.model.logs import LogLocation
from llmtop.parse.logs import assembler
from llmtop.record.reader import Recording
from llmtop.record.recorder import Recorder
from llmtop.record.replay import snapshot_at

from .fakes import body, fake_detect, fake_normalize

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / \
    "vllm-0.32-text-enginedead.log"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(),
                                reason="the captured vLLM log lands with the log parser")

TARGET = Target(name="vllm@127.0.0.1:9", base_url="http://127.0.0.1:9", host="127.0.0.1")
CONFIG = Config(targets=(TARGET,), interval_s=1.0, discover=False)
READ = time.mktime((2026, 12, 7, 9, 22, 3, 0, 0, -1))
"""When the test 'reads' the file: two seconds after the burst's own stamp (local time)."""
LOC = LogLocation(kind="file", label="/tmp/vllm.log", path="/tmp/vllm.log", fmt="vllm")


def _events():
    asm = assembler("vllm", "plain")
    out = []
    for line in FIXTURE.read_text(encoding="utf-8", errors="replace").splitlines():
        out += asm.feed(line, READ)
    return out + asm.flush(READ + 10.0)


def _scrape(t, ok):
    if ok:
        return RawScrape(target=TARGET.name, url="http://127.0.0.1:9/metrics", t_wall=t,
                         t_mono=t - READ + 1000.0, status="ok", http_status=200,
                         body=body(counters={"generation_tokens": t - READ + 100}))
    return RawScrape(target=TARGET.name, url="http://127.0.0.1:9/metrics", t_wall=t,
                     t_mono=t - READ + 1000.0, status="down", error="connection refused")


def test_real_burst_down_live_and_replayed(tmp_path):
    events = _events()
    dead = [e for e in events if is_error(e)][-1]
    assert "EngineDeadError: EngineCore encountered an issue" in dead.headline
    assert events[-1].severity != "error"  # the lines after it (nanobind...) come later
    path = tmp_path / "dead.llrec"
    rec = Recorder(path, CONFIG, clock=lambda: READ)
    store = Store(CONFIG, normalize=fake_normalize, detect=fake_detect)
    start = dead.t_wall - 20.0  # answering well until a second before the burst's stamp
    for i in range(30):
        t = start + i
        raw = _scrape(t, ok=t < dead.t_wall)
        for item in (raw, *([RawLog(TARGET.name, t, raw.t_mono, LOC, events)]
                            if i == 22 else [])):
            rec(item)
            (store.ingest if isinstance(item, RawScrape) else store.add_log)(item)
        store.commit(raw.t_mono, t)
        rec.tick(raw.t_mono, t)
    rec.close()
    want = f"log: {headline_text(dead)} (connection refused)"
    (row,) = store.snapshot(10.0).engines
    assert row.state == "down" and row.error == want
    assert "Shutting down" not in row.error and "nanobind" not in row.error
    assert any(e.text in (f"DOWN: {want}", f"DOWN — log: {headline_text(dead)}")
               for e in store.events)
    recording = Recording.open(path)
    (replayed,) = snapshot_at(recording, recording.end, 1.0, CONFIG).engines
    assert replayed.state == "down" and replayed.error == want
