"""The follower: lines become events through the assembler it is given, queued per target
and bounded between drains (errors kept apart), errors said once, one reader thread."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmtop import clock
from llmtop.model import LogEvent, LogLocation
from llmtop.parse.logs import assembler
from llmtop.sources.logs import Follower


class _Words:
    """A stand-in assembler: one event per line, ``ERROR`` in it makes it an error."""

    made: list[tuple[str | None, str]] = []

    def __init__(self, fmt: str | None, envelope: str) -> None:
        _Words.made.append((fmt, envelope))

    def feed(self, raw: str, read_time: float) -> list[LogEvent]:
        if raw == "boom":
            raise ValueError("cannot parse")
        sev = "error" if "ERROR" in raw else "info"
        return [LogEvent(read_time, sev, (raw,), raw, stamped=False)]

    def flush(self, now: float) -> list[LogEvent]:
        return []


def _file(path: Path, engine: str | None = "vllm", kind: str = "file") -> LogLocation:
    return LogLocation(kind, str(path), path=str(path), fmt=engine)


def _write(path: Path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


def test_lines_become_events_of_the_target_through_the_assembler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_796_000_000.0]
    monkeypatch.setattr(clock, "time", lambda: now[0])
    log = tmp_path / "vllm.log"
    log.write_text("")
    f = Follower(assembler, thread=False)
    f.follow("vllm@127.0.0.1:8000", _file(log))
    f.poll()
    first = f.drain()
    assert [(r.target, r.events, r.error) for r in first] == [("vllm@127.0.0.1:8000", [], None)]
    # lines as the real vLLM 0.32 writes them (the project's log notes)
    _write(log, "(APIServer pid=20852) INFO 12-07 04:47:19 [api_server.py:1] ready",
           "INFO:     Shutting down")
    f.poll()
    now[0] += 5.0  # quiet: the assembler closes what it holds open
    f.poll()
    raws = f.drain()
    assert {r.target for r in raws} == {"vllm@127.0.0.1:8000"}
    text = [" ".join(e.lines) for r in raws for e in r.events]
    assert len(text) == 2 and "ready" in text[0] and "Shutting down" in text[1]
    assert raws[0].location.path == str(log) and raws[0].dropped == 0
    assert not raws[0].rotated
    assert f.drain() == []  # nothing new: nothing answered


def test_each_kind_gets_its_envelope(tmp_path: Path) -> None:
    _Words.made = []
    f = Follower(_Words, thread=False)
    for kind in ("file", "docker", "cri"):
        p = tmp_path / f"{kind}.log"
        p.write_text("")
        f.follow(kind, _file(p, kind=kind))
    assert _Words.made == [("vllm", "plain"), ("vllm", "docker"), ("vllm", "cri")]


def test_bounded_between_drains_and_an_error_survives_a_flood(tmp_path: Path) -> None:
    log = tmp_path / "flood.log"
    log.write_text("")
    f = Follower(_Words, lines=100, thread=False, rate=1e9)
    f.follow("t", _file(log))
    f.poll()
    f.drain()
    _write(log, *[f"info {i}" for i in range(500)], "ERROR the cause",
           *[f"noise {i}" for i in range(2000)])
    f.poll()
    (raw,) = f.drain()
    assert len(raw.events) == 91  # 90 of the rest, and the errors' tenth holds the one error
    assert raw.dropped == 2501 - 91
    assert "ERROR the cause" in [e.headline for e in raw.events]  # kept apart from the flood
    assert raw.events[-1].headline == "noise 1999"  # the newest kept, in order
    ts = [e.headline for e in raw.events]
    assert ts.index("ERROR the cause") == 0


def test_past_its_parse_rate_a_flood_is_scanned_for_trouble_not_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [50.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])
    fed: list[str] = []

    class Counting(_Words):
        def feed(self, raw: str, read_time: float) -> list[LogEvent]:
            fed.append(raw)
            return super().feed(raw, read_time)

    log = tmp_path / "flood.log"
    log.write_text("")
    f = Follower(Counting, lines=10_000, thread=False, rate=100)
    f.follow("t", _file(log))
    f.poll()  # the first read is the log's last few KB, whole
    _write(log, *[f"noise {i}" for i in range(1000)], "torch.OutOfMemoryError: CUDA out of memory",
           *[f"noise {i}" for i in range(1000, 3000)],
           "E1207 09:24:33.350857 27596 pb_stub.cc:714] \"Failed to process the request\"",
           "more noise")
    f.poll()
    (raw,) = f.drain()
    assert fed[:100] == [f"noise {i}" for i in range(100)]  # the second's worth, whole
    assert fed[100:] == ["torch.OutOfMemoryError: CUDA out of memory",
                         "E1207 09:24:33.350857 27596 pb_stub.cc:714] "
                         "\"Failed to process the request\""]
    assert raw.dropped == 3003 - 102 and len(raw.events) == 102
    now[0] += 0.5  # half a second later: half the rate again
    _write(log, *[f"later {i}" for i in range(80)])
    f.poll()
    assert len(f.drain()[0].events) == 50


def test_an_unreadable_location_answers_once_with_its_error() -> None:
    f = Follower(assembler, thread=False)
    where = LogLocation(None, "pid 4711", pid=4711, error="/proc/4711/fd/1 is a terminal")
    f.follow("vllm@127.0.0.1:8000", where)
    f.poll()
    (raw,) = f.drain()
    assert raw.error == "/proc/4711/fd/1 is a terminal" and raw.events == []
    f.poll()
    assert f.drain() == []


def test_a_missing_file_is_said_once_and_followed_when_it_appears(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])
    log = tmp_path / "later.log"
    f = Follower(_Words, thread=False)
    f.follow("t", _file(log))
    f.poll()
    (raw,) = f.drain()
    assert raw.error == f"{log} not found (following when it appears)"
    f.poll()
    assert f.drain() == []  # the same error: said once
    _write(log, "hello")
    now[0] = 11.5
    f.poll()
    (raw,) = f.drain()
    assert raw.error is None and [e.headline for e in raw.events] == ["hello"]


def test_a_line_the_assembler_cannot_take_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("")
    f = Follower(_Words, thread=False)
    f.follow("t", _file(log))
    _write(log, "boom", "fine")
    f.poll()
    (raw,) = f.drain()
    assert [(e.severity, e.headline) for e in raw.events] == [
        ("warning", "(a log line could not be read: ValueError)"), ("info", "fine")]


def test_forget_stops_and_a_moved_log_is_followed_anew(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("")
    b.write_text("")
    f = Follower(_Words, thread=False)
    f.follow("t", _file(a))
    f.follow("t", _file(a))  # the same place: nothing changes
    f.poll()
    f.drain()
    f.follow("t", _file(b))
    _write(a, "old place")
    _write(b, "new place")
    f.poll()
    (raw,) = f.drain()
    assert [e.headline for e in raw.events] == ["new place"]
    f.forget("t")
    _write(b, "after forget")
    f.poll()
    assert f.drain() == [] and f.following() == {}


def test_one_reader_thread_reads_off_the_caller_and_ends_on_close(tmp_path: Path) -> None:
    log = tmp_path / "live.log"
    log.write_text("")
    f = Follower(_Words, poll_s=0.02)
    f.follow("t", _file(log))
    f.follow("u", _file(log))
    _write(log, "from the engine")
    seen: list[str] = []
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        seen += [e.headline for r in f.drain() for e in r.events]
        time.sleep(0.02)
    assert seen == ["from the engine", "from the engine"]
    thread = f._thread
    assert thread is not None and thread.name == "llmtop-logs"
    f.close()
    assert not thread.is_alive()


def test_a_new_line_format_goes_on_where_the_reader_was(tmp_path: Path) -> None:
    _Words.made = []
    log = tmp_path / "a.log"
    _write(log, "before")
    f = Follower(_Words, thread=False)
    f.follow("t", _file(log, engine=None))
    f.poll()
    assert [e.headline for r in f.drain() for e in r.events] == ["before"]
    f.follow("t", _file(log, engine="vllm"))  # the engine became known
    _write(log, "after")
    f.poll()
    (raw,) = f.drain()
    assert [e.headline for e in raw.events] == ["after"]  # nothing read twice
    assert raw.location.fmt == "vllm" and _Words.made == [(None, "plain"), ("vllm", "plain")]
