"""The journal and ``cmd:`` logs: a child process each, read without blocking, ended and reaped
when forgotten or closed, started again (only what is new) when it ends."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from llmtop import clock
from llmtop.model import LogLocation
from llmtop.sources.logs import Follower
from llmtop.sources.logs.child import ChildTail, journal_argv
from llmtop.sources.logs.follower import make_reader


def _fake_journalctl(tmp_path: Path, *, stay: bool = True) -> Path:
    """A stand-in ``journalctl``: writes its arguments and one entry, then follows (sleeps)."""
    exe = tmp_path / "journalctl"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"open({str(tmp_path / 'argv')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "print(json.dumps({'MESSAGE': 'hello from the unit', 'PRIORITY': '6',"
        " '_SYSTEMD_UNIT': 'vllm.service'}), flush=True)\n"
        + ("time.sleep(600)\n" if stay else ""))
    exe.chmod(0o755)
    return exe


def _read_until(tail: ChildTail, n: int, timeout: float = 15.0) -> list[str]:
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += tail.read().lines
        time.sleep(0.02)
    return got


def _gone(pid: int) -> bool:
    """True when ``pid`` neither runs nor waits to be reaped (no zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state not in ("R", "S", "D", "Z", "T", "t")


def test_journal_argv_by_unit_else_pid() -> None:
    assert journal_argv("vllm.service", 42, 50) == [
        "journalctl", "-o", "json", "--follow", "--no-pager", "--lines", "50",
        "_SYSTEMD_UNIT=vllm.service"]
    assert journal_argv(None, 42, 0)[-2:] == ["0", "_PID=42"]


def test_the_journal_child_is_read_and_ended_without_a_zombie_when_forgotten(
        tmp_path: Path) -> None:
    exe = _fake_journalctl(tmp_path)
    where = LogLocation("journal", "journal vllm.service", fmt="vllm", unit="vllm.service")
    f = Follower(lambda fmt, env: _Env(env), thread=False,
                 reader=lambda loc: make_reader(loc, journalctl=str(exe)))
    f.follow("vllm@127.0.0.1:8000", where)
    got: list[str] = []
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        f.poll()
        got = [e.headline for r in f.drain() for e in r.events]
        time.sleep(0.02)
    assert got == ["journal:" + '{"MESSAGE": "hello from the unit", "PRIORITY": "6", '
                   '"_SYSTEMD_UNIT": "vllm.service"}']
    assert (tmp_path / "argv").read_text().split("\n")[0] == (
        "-o json --follow --no-pager --lines 50 _SYSTEMD_UNIT=vllm.service")
    child = f._watches["vllm@127.0.0.1:8000"].reader.child  # type: ignore[union-attr]
    assert child is not None and child.alive()
    f.forget("vllm@127.0.0.1:8000")  # no thread here: ended at once
    assert _gone(child.pid)


def test_close_ends_every_child(tmp_path: Path) -> None:
    exe = _fake_journalctl(tmp_path)
    tail = ChildTail([str(exe)], "journalctl (x)")
    assert _read_until(tail, 1)
    pid = tail.child.pid  # type: ignore[union-attr]
    tail.close()
    tail.close()  # idempotent
    assert _gone(pid)


def test_a_child_that_ends_is_said_and_started_again_for_what_is_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _fake_journalctl(tmp_path, stay=False)
    tail = ChildTail([str(exe), "first"], "journalctl (x)", again=[str(exe), "again"])
    got = _read_until(tail, 1)
    assert len(got) == 1
    deadline = time.monotonic() + 15
    err = None
    while err is None and time.monotonic() < deadline:
        err = tail.read().error
        time.sleep(0.02)
    assert err == "journalctl (x) ended (exit status 0)"
    now = clock.monotonic() + 1.5  # past its back-off
    monkeypatch.setattr(clock, "monotonic", lambda: now)
    assert len(_read_until(tail, 1)) == 1
    assert (tmp_path / "argv").read_text().split() == ["first", "again"]
    tail.close()


def test_a_command_that_cannot_start_is_an_error_not_a_crash(tmp_path: Path) -> None:
    tail = ChildTail([str(tmp_path / "no-such-program")], "cmd:no-such-program")
    got = tail.read()
    assert got.lines == [] and got.error is not None
    assert "no-such-program" in got.error
    assert tail._fd is None and tail.child is None  # its pipe closed, nothing left open
    assert tail.read().error == got.error  # waiting its back-off, said the same


class _Env:
    """An assembler that shows which envelope it was made for."""

    def __init__(self, envelope: str) -> None:
        self.envelope = envelope

    def feed(self, raw: str, read_time: float) -> list:
        from llmtop.model import LogEvent

        text = f"{self.envelope}:{raw}"
        return [LogEvent(read_time, "info", (text,), text, stamped=False)]

    def flush(self, now: float) -> list:
        return []


def test_a_cmd_log_is_its_commands_output_run_without_a_shell(tmp_path: Path) -> None:
    from llmtop.discovery.logs import configured

    script = tmp_path / "emit.py"
    script.write_text("import sys, time\nprint('from the command', sys.argv[1], flush=True)\n"
                      "time.sleep(600)\n")
    where = configured(f"cmd:{sys.executable} {script} $HOME", "vllm")  # no shell expands it
    assert where.kind == "command"
    f = Follower(lambda fmt, env: _Env(env), thread=False)
    f.follow("t", where)
    got: list[str] = []
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        f.poll()
        got = [e.headline for r in f.drain() for e in r.events]
        time.sleep(0.02)
    assert got == ["plain:from the command $HOME"]
    child = f._watches["t"].reader.child  # type: ignore[union-attr]
    f.close()
    assert child is not None and _gone(child.pid)
