"""llmtop/children.py: process groups stop whole, and nothing outlives a killed llmtop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from llmtop import children

ROOT = Path(__file__).resolve().parent.parent


def _exists(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The pids still alive after waiting up to ``within_s`` (bounded poll)."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        left = [p for p in pids if _exists(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if _exists(p)]


def _read_pid(path: Path, within_s: float = 10.0) -> int:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        text = path.read_text().strip() if path.exists() else ""
        if text.endswith("\n") or text.isdigit():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"no pid in {path}")


def test_stop_ends_the_shell_and_its_grandchild(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    child = children.spawn(f"sleep 300 & echo $! > {pidfile}; wait", shell=True)
    grandchild = _read_pid(pidfile)
    assert child.alive() and _exists(grandchild)
    assert os.getpgid(grandchild) == child.pgid == child.pid
    status = child.stop(timeout_s=5)
    assert status is not None and status != 0
    assert not child.alive()
    assert _wait_gone([child.pid, grandchild]) == []
    assert child.stop() == status  # idempotent


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path):
    ready = tmp_path / "ready"
    child = children.spawn([sys.executable, "-c",
                            "import signal, time, pathlib\n"
                            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                            f"pathlib.Path({str(ready)!r}).write_text('1')\n"
                            "time.sleep(300)"])
    end = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert child.stop(timeout_s=0.3) == -signal.SIGKILL
    assert not _exists(child.pid)


def test_log_tail_and_missing_log(tmp_path):
    log = tmp_path / "out.log"
    child = children.spawn([sys.executable, "-c",
                            "import sys\nfor i in range(30): print('line', i)\n"
                            "print('oops', file=sys.stderr)"], log_path=str(log))
    child.proc.wait(10)
    assert child.tail(3).splitlines() == ["line 28", "line 29", "oops"]
    assert child.tail(0) == ""
    assert child.stop() == 0
    quiet = children.spawn(["true"])
    assert quiet.tail() == ""
    quiet.stop()


def test_a_program_that_does_not_exist_is_a_clear_error(tmp_path):
    with pytest.raises(children.LlmtopError, match=r"cannot start .*no-such-program"):
        children.spawn([str(tmp_path / "no-such-program")])


def test_temp_dir_removed_by_stop_all(monkeypatch):
    # stop_all ends every child of this process: here only this test's (the worker's shared
    # servers, a demo fleet or another test's Prometheus, keep running)
    monkeypatch.setattr(children, "_children", [])
    monkeypatch.setattr(children, "_temp_dirs", [])
    path = children.temp_dir(prefix="llmtop-test-")
    Path(path, "f").write_text("x")
    child = children.spawn(["sleep", "300"])
    children.stop_all(timeout_s=5)
    assert not os.path.exists(path)
    assert not child.alive()
    kept = children.temp_dir()
    children.remove_temp_dir(kept)
    assert not os.path.exists(kept)


_PARENT = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {root!r})
    from llmtop import children
    # as in a terminal: a test runner started under nohup hands SIGHUP down ignored, and
    # llmtop rightly leaves an ignored SIGHUP alone (test_exit_handlers_leave_nohup_alone)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    children.install_exit_handlers()
    d = children.temp_dir(prefix="llmtop-test-")
    c = children.spawn("sleep 300 & echo $! > {pidfile}; wait", shell=True)
    while not os.path.exists({pidfile!r}) or not open({pidfile!r}).read().endswith("\\n"):
        time.sleep(0.02)
    print(c.pid, d, flush=True)
    time.sleep(300)
""")


def _parent(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int, str]:
    pidfile = tmp_path / "gc.pid"
    code = _PARENT.format(root=str(ROOT), pidfile=str(pidfile))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line, "the parent did not start its child"
    return proc, int(line[0]), int(pidfile.read_text()), line[1]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_nothing_outlives_the_parent(tmp_path, sig):
    proc, child_pid, grandchild, folder = _parent(tmp_path)
    assert _exists(child_pid) and _exists(grandchild) and os.path.isdir(folder)
    os.kill(proc.pid, sig)
    try:
        rc = proc.wait(10)
    finally:
        if proc.poll() is None:  # it did not end: leave no parent, child or grandchild behind
            os.killpg(proc.pid, signal.SIGKILL)
            for pid in (child_pid, grandchild):
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
    assert rc == (-sig if sig == signal.SIGKILL else 128 + sig)
    assert _wait_gone([child_pid, grandchild], within_s=10) == []
    end = time.monotonic() + 10
    while os.path.isdir(folder) and time.monotonic() < end:
        time.sleep(0.05)
    assert not os.path.isdir(folder)


def test_exit_handlers_leave_nohup_alone():
    code = ("import signal, sys\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "from llmtop import children\n"
            "children.install_exit_handlers(); children.install_exit_handlers()\n"
            "print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,"
            " signal.getsignal(signal.SIGTERM) is children._on_signal)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_no_second_mechanism():
    """Processes and temp folders are started through llmtop/children.py only."""
    banned = ("Popen(", "mkdtemp(", "TemporaryDirectory(", "mkstemp(", "os.fork(", "os.spawn",
              "os.system(")
    found = []
    for path in sorted((ROOT / "llmtop").rglob("*.py")):
        if path.name == "children.py" and path.parent.name == "llmtop":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(b in line for b in banned) and not line.lstrip().startswith("#"):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == [], "use llmtop.children.spawn / temp_dir instead:\n" + "\n".join(found)


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not __import__("shutil").which(
    "timeout"), reason="needs Linux /proc and GNU timeout")
def test_a_command_that_moves_to_its_own_group_is_still_stopped(tmp_path):
    """GNU ``timeout`` puts itself in a process group of its own (a tune plan's start
    command did): stopping the child still ends it and what it runs."""
    pidfile = tmp_path / "pid"
    c = children.spawn(f"timeout 60 sh -c 'echo $$ > {pidfile}; exec sleep 60'", shell=True)
    end = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    inner = int(pidfile.read_text())
    assert os.getpgid(inner) != c.pgid  # it left the group llmtop made
    c.stop(timeout_s=5)
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(inner, 0)


_ZOMBIE_PARENT = """
import ctypes, os, sys, time
sys.path.insert(0, {root!r})
from llmtop import children
# this process adopts orphans and never reaps them: a zombie stays in the stopped group,
# as under a container init that reaps slowly (seen in CI: a SIGHUP'd llmtop took > 10 s)
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
c = children.spawn("sleep 0.1 & exec sleep 300", shell=True)
time.sleep(1.0)  # the background sleep is now a zombie child of the group leader
t = time.monotonic()
c.stop(timeout_s=8)
print(round(time.monotonic() - t, 2), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_zombie_left_in_the_group_does_not_hold_up_stop():
    """An orphaned zombie still answers ``killpg(pgid, 0)``; stop must not wait for it."""
    out = subprocess.run([sys.executable, "-c", _ZOMBIE_PARENT.format(root=str(ROOT))],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip()) < 4.0  # not the 8 s until SIGKILL
