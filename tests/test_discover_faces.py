"""Every face takes its targets from one entry point and says discovery's notes the same way.

With no TARGET and nothing found (``docs/discovery.md``): ``--once`` answers once, so it
says so and exits 1; ``record`` and ``export`` run until stopped, so they say so and go on
searching every 10 s. With no TARGET and ``--no-discover`` there is nothing to watch: each
exits 1 with the same message (``record`` goes on when it receives spans).
"""

from __future__ import annotations

import io
import logging

import pytest

from llmtop.cli import record as record_cli
from llmtop.cli.export import build_parser as export_parser
from llmtop.cli.export import main as export_main
from llmtop.cli.main import build_parser
from llmtop.cli.watch import SEARCHING, build_monitor
from llmtop.config import Config, Target
from llmtop.discovery import Found, find_targets
from llmtop.once import run_once
from llmtop.targets import NO_TARGETS_MESSAGE

NOTE = ("2 engine processes in other network namespaces could not be read: run as root, or "
        "give their addresses")
A = Target(name="127.0.0.1:9", base_url="http://127.0.0.1:9", port=9)


@pytest.fixture
def nothing_found(monkeypatch):
    """Every search finds nothing and says NOTE; counts the searches."""
    searches: list[int] = []

    async def discover(config, notes=None, **kw):
        searches.append(1)
        if notes is not None:
            notes.append(NOTE)
        return []

    monkeypatch.setattr("llmtop.discovery.search.discover", discover)
    return searches


def _said(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_entry_point_searches_only_without_a_target(nothing_found):
    given = await find_targets(Config(targets=(A,), discover=True))
    assert given == Found((A,)) and nothing_found == []
    off = await find_targets(Config(discover=False))
    assert off == Found(()) and nothing_found == []
    found = await find_targets(Config(discover=True))
    assert found == Found((), (NOTE,), searching=True) and nothing_found == [1]


def test_once_says_the_note_then_exits_one(nothing_found):
    err = io.StringIO()
    assert run_once(Config(discover=True), as_json=True, out=io.StringIO(), err=err) == 1
    lines = err.getvalue().splitlines()
    assert lines[:2] == [f"llmtop: {NOTE}", f"llmtop: {NO_TARGETS_MESSAGE}"]


def test_once_with_a_recording_monitor_decides_the_same(nothing_found):
    made: list[Config] = []
    err = io.StringIO()
    assert run_once(Config(discover=True), out=io.StringIO(), err=err,
                    make_monitor=made.append) == 1
    assert made == [] and err.getvalue().startswith(f"llmtop: {NOTE}\n")


def test_record_says_the_note_and_goes_on_searching(nothing_found, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    path = tmp_path / "r.llrec"
    rc = record_cli.record_main([str(path), "--duration", "0.3", "--interval", "0.1"])
    assert rc == 0 and path.exists()
    assert _said(caplog) == [NOTE, SEARCHING]  # each once: the event log's copy not again


def test_export_says_the_note_and_goes_on_searching(nothing_found, caplog):
    caplog.set_level(logging.INFO)
    rc = export_main(["--listen", "127.0.0.1:0", "--duration", "0.3", "--interval", "0.1"],
                     export_parser(build_parser()))
    assert rc == 0
    assert _said(caplog) == [NOTE, SEARCHING]
    assert any(r.getMessage().startswith("serving http://127.0.0.1:") for r in caplog.records)


@pytest.mark.parametrize("face", ["record", "export", "once"])
def test_no_target_and_no_search_exits_one_everywhere(face, nothing_found, tmp_path, caplog):
    err = io.StringIO()
    if face == "record":
        rc = record_cli.record_main([str(tmp_path / "r.llrec"), "--no-discover"])
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    elif face == "export":
        rc = export_main(["--listen", "127.0.0.1:0", "--no-discover"],
                         export_parser(build_parser()))
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    else:
        rc = run_once(Config(discover=False), out=io.StringIO(), err=err)
        said = err.getvalue().splitlines()[:1]
    assert rc == 1
    assert said == [NO_TARGETS_MESSAGE if face != "once" else f"llmtop: {NO_TARGETS_MESSAGE}"]
    assert nothing_found == []


async def test_the_monitor_of_a_watching_face_takes_the_first_search_and_its_notes():
    found = Found((), (NOTE,), searching=True)
    monitor = build_monitor(Config(discover=True, interval_s=0.1), found)
    try:
        assert monitor.rediscovery is not None and monitor.rediscovery.searched
        await monitor.tick()
        assert [(e.level, e.text) for e in monitor.store.events if e.text == NOTE] == [
            ("warn", NOTE)]
    finally:
        await monitor.aclose()
    given = build_monitor(Config(targets=(A,)), Found((A,)))
    try:
        assert given.rediscovery is None and given.targets == [A]
    finally:
        await given.aclose()



async def test_the_tui_searches_in_its_prefetch_and_says_the_note_in_its_event_log(
        nothing_found):
    from llmtop.ui.live import make_source

    source, problems = make_source(Config(discover=True, interval_s=0.1), prefetch=True)
    monitor = source.monitor
    try:
        assert problems == [] and monitor.rediscovery is not None
        await monitor.tick(timeout_s=5.0)
        await monitor.tick(timeout_s=5.0)
        assert monitor.targets == []  # the empty state; the search goes on every 10 s
        assert [(e.level, e.text) for e in monitor.store.events if e.text == NOTE] == [
            ("warn", NOTE)]
        assert nothing_found == [1]
    finally:
        await monitor.aclose()
