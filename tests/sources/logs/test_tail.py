"""A followed file read like ``tail -F``: its last few KB, rotation of each kind, truncation,
huge and binary lines, a missing file retried with back-off, a backlog skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmtop import clock
from llmtop.sources.logs.tail import FileTail, LineSplitter, clean, newest_cri, retry_after


def _append(path: Path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def test_it_starts_from_the_last_few_kb_never_the_whole_file(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    _append(log, *(f"line {i:05d} " + "x" * 40 for i in range(5000)))  # ~250 KB
    tail = FileTail(str(log), start_bytes=1024)
    got = tail.read().lines
    assert 10 < len(got) < 30  # about 1 KB of 52-byte lines
    assert got[-1].startswith("line 04999 ")
    assert all(len(line) == 51 for line in got)  # the partial first line was dropped
    _append(log, "new one")
    assert tail.read().lines == ["new one"]
    assert tail.read().lines == []


def test_a_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("")
    tail = FileTail(str(log))
    assert tail.read().lines == []
    with open(log, "a") as f:
        f.write("half of")
    assert tail.read().lines == []
    with open(log, "a") as f:
        f.write(" a line\nnext\n")
    assert tail.read().lines == ["half of a line", "next"]


def test_rename_rotation_reads_the_old_file_to_its_end_then_the_new_one(tmp_path: Path) -> None:
    """Docker's json-file with max-size: ``<id>-json.log`` renamed ``.1``, a new file made."""
    log = tmp_path / "c-json.log"
    _append(log, "one")
    tail = FileTail(str(log))
    assert tail.read().lines == ["one"]
    with open(log, "a") as writer:  # the writer still holds the old file
        writer.write("two\n")
        writer.flush()
        os.rename(log, tmp_path / "c-json.log.1")
        writer.write("three\n")
    got = tail.read()
    assert got.lines == ["two", "three"] and not got.rotated  # no new file yet: keep reading
    _append(log, "four")
    got = tail.read()
    assert got.lines == ["four"] and got.rotated
    _append(log, "five")
    assert tail.read().lines == ["five"]


def test_cri_rotation_to_a_timestamped_name_and_a_restart(tmp_path: Path) -> None:
    """The kubelet renames ``0.log`` to ``0.log.<YYYYMMDD-HHMMSS>``; a restart writes ``1.log``."""
    folder = tmp_path / "prod_vllm-0_uid" / "vllm"
    folder.mkdir(parents=True)
    zero = folder / "0.log"
    _append(zero, "2026-12-07T03:12:04.000000001Z stdout F a")
    tail = FileTail(str(zero), resolve=lambda: newest_cri(str(folder)))
    assert tail.read().lines == ["2026-12-07T03:12:04.000000001Z stdout F a"]
    os.rename(zero, folder / "0.log.20261207-031205")
    _append(zero, "2026-12-07T03:12:05.000000001Z stdout F b")
    got = tail.read()
    assert got.rotated and got.lines == ["2026-12-07T03:12:05.000000001Z stdout F b"]
    _append(folder / "1.log", "2026-12-07T03:13:00.000000001Z stderr F restarted")
    got = tail.read()
    assert got.rotated and got.lines == ["2026-12-07T03:13:00.000000001Z stderr F restarted"]
    assert tail.path == str(folder / "1.log")


def test_truncation_in_place_reads_from_the_start_again(tmp_path: Path) -> None:
    log = tmp_path / "t.log"
    _append(log, "old " * 10, "older " * 10)
    tail = FileTail(str(log))
    tail.read()
    with open(log, "w") as f:  # copytruncate, or the engine restarted with > file
        f.write("fresh\n")
    got = tail.read()
    assert got.rotated and got.lines == ["fresh"]


def test_a_huge_line_is_cut_and_the_next_line_comes_whole(tmp_path: Path) -> None:
    log = tmp_path / "h.log"
    log.write_text("")
    tail = FileTail(str(log), max_line=1000)
    assert tail.read().lines == []
    with open(log, "ab") as f:
        f.write(b"y" * 3_000_000 + b"\nafter\n")
    got = tail.read().lines
    assert got == ["y" * 1000, "after"]


def test_binary_and_invalid_utf8_become_safe_text() -> None:
    text = clean(b"\x00bin\xff\xfe ok\tTAB \x1b[31mred\r")
    assert text == "\ufffdbin\ufffd\ufffd ok\tTAB \x1b[31mred"
    lines: list[str] = []
    LineSplitter(16).feed(bytes(range(256)).replace(b"\n", b"") + b"\n", lines)
    assert len(lines) == 1 and len(lines[0]) <= 16 and "\x00" not in lines[0]


def test_a_missing_file_is_an_error_retried_with_back_off_then_read_from_its_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])
    log = tmp_path / "later.log"
    tail = FileTail(str(log), start_bytes=8)
    got = tail.read()
    assert got.error == f"{log} not found (following when it appears)"
    assert tail.next_try == 101.0
    _append(log, "first line of a new file")
    assert tail.read().lines == [] and tail.read().error is not None  # waiting its back-off
    now[0] = 101.0
    got = tail.read()
    assert got.error is None and got.lines == ["first line of a new file"]  # from the start
    assert [retry_after(n) for n in (1, 2, 3, 6, 9)] == [1.0, 2.0, 4.0, 30.0, 30.0]


def test_permission_denied_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    def denied(*a: object, **k: object) -> int:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", denied)
    got = FileTail(str(tmp_path / "x.log")).read()
    assert got.error == f"{tmp_path / 'x.log'}: permission denied: run as root or join group " \
                        "adm/docker"


def test_a_folder_is_said_not_read(tmp_path: Path) -> None:
    got = FileTail(str(tmp_path)).read()
    assert got.lines == [] and got.error is not None and "folder" in got.error


def test_a_vanished_file_is_said_after_a_while(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(clock, "monotonic", lambda: now[0])
    log = tmp_path / "v.log"
    _append(log, "a")
    tail = FileTail(str(log))
    tail.read()
    log.unlink()
    assert tail.read().error is None
    now[0] = 6.0
    assert tail.read().error == f"{log} vanished (still reading the file it named)"


def test_a_backlog_larger_than_the_skip_size_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "flood.log"
    log.write_text("")
    tail = FileTail(str(log), start_bytes=100, skip_bytes=10_000)
    tail.read()
    _append(log, *(f"{i:09d}" for i in range(5000)))  # 50 KB behind
    got = tail.read()
    assert got.skipped == 50_000 - 100
    assert got.lines[-1] == "000004999" and len(got.lines) <= 10


def test_a_line_that_never_ends_is_cut_once_and_not_kept() -> None:
    split = LineSplitter(100)
    lines: list[str] = []
    for _ in range(10):
        split.feed(b"z" * 1000, lines)
    assert lines == ["z" * 100]  # cut when it passed the bound, not kept growing
    split.feed(b"zzz\nb\n", lines)
    assert lines == ["z" * 100, "b"]


def test_past_its_allowance_only_lines_with_a_mark_of_trouble_are_made_text() -> None:
    split = LineSplitter(1000)
    split.allow = 1
    lines: list[str] = []
    split.feed(b"first\nhalf of an ", lines)
    split.feed(b"ERROR line\nquiet\nTraceback (most recent call last):\nquiet\nlevel=error "
               b"msg=x\ntail of", lines)
    assert lines == ["first", "half of an ERROR line", "Traceback (most recent call last):",
                     "level=error msg=x"]
    assert split.skimmed == 2  # the quiet lines, counted, never decoded
    split.allow = None
    split.feed(b" it\n", lines)
    assert lines[-1] == "tail of it"
    # glog's letter at a line's start (Triton), at a read's first byte and after a newline
    split.allow, lines = 0, []
    split.feed(b"E1207 09:24:33.350857 27596 pb_stub.cc:714] first\nI1207 fine\n"
               b"F1207 09:24:34.000001 27596 server.cc:1] fatal\nEngine ok\n", lines)
    assert lines == ["E1207 09:24:33.350857 27596 pb_stub.cc:714] first",
                     "F1207 09:24:34.000001 27596 server.cc:1] fatal"]
