"""The log view on real lines: the vLLM 0.32 EngineDeadError burst as the real server wrote
it (captured into ``tests/fixtures/logs/`` by the log parser's branch), through the real
parser, at 80x24: the traceback whole with its headline, every row fitting, errors only and
search finding it. Skipped until the fixture is in the tree (it lands with the parser)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from rich.cells import cell_len

from llmtop.model.logs import LogLocation, LogSummary, severity_at_least
from llmtop.ui.fake import FakeSource, demo_snapshot
from llmtop.ui.fake_logs import with_log_events
from llmtop.ui.screens.logs import LogScreen
from llmtop.ui.widgets.logview import LogLines, headline_index

from .conftest import first_paint, make_app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / \
    "vllm-0.32-text-enginedead.log"
pytestmark = pytest.mark.skipif(not FIXTURE.exists(),
                                reason="the captured vLLM log lands with the log parser")

VLLM = "vllm@127.0.0.1:8000"
READ = time.mktime((2026, 12, 7, 9, 22, 3, 0, 0, -1))
"""When the test 'reads' the file: two seconds after the burst's own stamp (local time)."""


def _events():
    from llmtop.parse.logs import assembler

    asm = assembler("vllm", "plain")
    out = []
    for line in FIXTURE.read_text(encoding="utf-8", errors="replace").splitlines():
        out += asm.feed(line, READ)
    return out + asm.flush(READ + 10.0)


def _source(events) -> FakeSource:
    dead = [e for e in events if severity_at_least(e.severity, "error")][-1]
    log = LogSummary(location=LogLocation(kind="file", label="/tmp/vllm.log"),
                     counts={"error": 1}, last_error=dead, new_errors=1)
    snap = demo_snapshot(t=READ)
    rows = [replace(r, log=log, state="down") if r.target == VLLM else r
            for r in snap.engines]
    return FakeSource(with_log_events(replace(snap, engines=rows), {VLLM: events}))


async def test_the_real_engine_dead_burst_reads_whole_at_80x24():
    events = _events()
    dead = [e for e in events if severity_at_least(e.severity, "error")][-1]
    assert "EngineDeadError" in dead.headline and len(dead.lines) > 3
    app = make_app(source=_source(events))
    async with app.run_test(size=(80, 24)) as pilot:
        await first_paint(app, pilot)
        await pilot.press("down", "down", "L")
        await pilot.pause()
        assert isinstance(app.screen, LogScreen)
        lines = app.screen.query_one(LogLines)
        for r in range(len(lines.rows)):  # every row of the whole log fits, printable
            plain = lines.row_text(r).plain
            assert cell_len(plain) <= 80 and plain.isprintable(), plain
        i = lines.events.index(dead)
        drawn = {lines.rows[r][1] for r in range(len(lines.rows)) if lines.rows[r][0] == i}
        assert drawn == set(range(len(dead.lines)))  # the traceback whole
        head = next(r for r in range(len(lines.rows))
                    if lines.rows[r][:2] == (i, headline_index(dead)))
        assert any("bold" in str(s.style) for s in lines.row_text(head).spans)
        await pilot.press("e", "e")  # errors only: the burst is there
        await pilot.pause()
        assert dead in lines.events
        assert all(severity_at_least(e.severity, "error") for e in lines.events)
        await pilot.press("slash", *"EngineDeadError", "enter")
        await pilot.pause()
        assert lines.matches and lines.current is not None
        assert any("EngineDeadError" in row for row in lines.visible_text())
