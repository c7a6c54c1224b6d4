"""Child processes and temporary folders that end when llmtop ends, however it ends.

Every process llmtop starts (demo engines, the fleet demo's Prometheus / VictoriaMetrics, the
probe worker, a bake-off's engines) goes through :func:`spawn`: it runs in its own process
group (so a shell's grandchildren go with it), with stdin from ``/dev/null`` and its output in
a log file. :func:`stop_all` (run at interpreter exit, and by the SIGHUP / SIGTERM handlers of
:func:`install_exit_handlers`) stops every group and removes every :func:`temp_dir`.

When llmtop itself dies without running any of that (SIGKILL, a crash in C), a watchdog
notices: one small Python process per llmtop process, started with the first child, reading
a pipe from llmtop. It learns each group and folder as it is made; when the pipe reaches end
of file or its parent changes, it sends SIGTERM to every group it knows, SIGKILL to what is
left after a grace period, removes the folders and exits. ``PR_SET_PDEATHSIG`` alone would
not do: it reaches only the direct child, not a shell's grandchildren, and it fires when the
*thread* that forked exits.

Imports only the standard library and :mod:`llmtop.errors` (the bottom layer).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence

from llmtop.errors import LlmtopError

__all__ = ["Child", "install_exit_handlers", "remove_temp_dir", "spawn", "stop_all",
           "temp_dir"]

_GRACE_S = 3.0
"""Seconds the watchdog waits between SIGTERM and SIGKILL."""

# The watchdog: argv[1] = the parent pid. Lines on stdin: "+PGID", "-PGID", "d PATH", "r PATH".
_WATCHDOG = r"""
import os, select, shutil, signal, sys, time
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGTSTP):
    signal.signal(s, signal.SIG_IGN)
parent, grace = int(sys.argv[1]), float(sys.argv[2])
groups, dirs, buf = set(), set(), b""
while True:
    orphan = os.getppid() != parent
    if not select.select([0], [], [], 0 if orphan else 0.5)[0]:
        if orphan:
            break
        continue
    data = os.read(0, 65536)
    if not data:
        break
    buf += data
    *lines, buf = buf.split(b"\n")
    for line in lines:
        op, arg = line[:1], line[1:].decode("utf-8", "surrogateescape").strip()
        if op == b"+": groups.add(int(arg))
        elif op == b"-": groups.discard(int(arg))
        elif op == b"d": dirs.add(arg)
        elif op == b"r": dirs.discard(arg)
def in_session(sid, live):
    out = set() if live else {sid}
    try:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    f = open(f"/proc/{d}/stat", "rb").read().rsplit(b")", 1)[1].split()
                    if int(f[3]) == sid and not (live and f[0] in (b"Z", b"X")):
                        out.add(int(f[2]))
                except (OSError, ValueError, IndexError): pass
    except OSError: return {sid}
    return out
def signal_all(sig):
    for g in list(groups):
        alive = False
        for pg in in_session(g, sig == 0):
            try:
                os.killpg(pg, sig); alive = True
            except OSError:
                pass
        if not alive:
            groups.discard(g)
signal_all(signal.SIGTERM)
end = time.monotonic() + grace
while groups and time.monotonic() < end:
    time.sleep(0.05)
    signal_all(0)
signal_all(signal.SIGKILL)
for d in dirs:
    shutil.rmtree(d, ignore_errors=True)
"""

_lock = threading.RLock()
_children: list[Child] = []
_temp_dirs: list[str] = []
_watchdog: subprocess.Popen[bytes] | None = None
_owner_pid = os.getpid()
_atexit_done = False
_handlers_installed = False
_exiting = False


def session_groups(sid: int, *, live_only: bool = False) -> set[int]:
    """The process groups of session ``sid`` (its leader's pid), from ``/proc`` on Linux;
    ``{sid}`` alone elsewhere. ``live_only``: only groups with a member that is not a zombie
    (an orphan waits as a zombie until init reaps it, and some container inits are slow)."""
    out = set() if live_only else {sid}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {sid}
    for d in names:
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            # fields after the name: state ppid pgrp session
            if int(fields[3]) == sid and not (live_only and fields[0] in (b"Z", b"X")):
                out.add(int(fields[2]))
        except (OSError, ValueError, IndexError):
            continue
    return out


class Child:
    """A process started by :func:`spawn`, leader of its own process group."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: str | None) -> None:
        self.proc = proc
        self.pid: int = proc.pid
        self.pgid: int = proc.pid
        self.log_path = log_path
        self.started_mono = time.monotonic()
        self._status: int | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"Child(pid={self.pid}, alive={self.alive()}, log={self.log_path!r})"

    def alive(self) -> bool:
        """True while the process itself runs."""
        return self.proc.poll() is None

    def _signal_group(self, sig: int) -> bool:
        """Send ``sig`` to every group of the child's session (a command such as GNU
        ``timeout`` moves itself into a group of its own); False when none is left.
        Signal 0 asks only whether one is left: zombies do not count."""
        alive = False
        for pgid in session_groups(self.pgid, live_only=sig == 0):
            try:
                os.killpg(pgid, sig)
                alive = True
            except (ProcessLookupError, PermissionError):
                continue
        return alive

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM the whole group, SIGKILL after ``timeout_s``; returns the exit status.

        Idempotent: a second call returns the first call's status at once.
        """
        if self._stopped:
            return self._status
        self._signal_group(signal.SIGTERM)
        deadline = time.monotonic() + max(0.0, timeout_s)
        while time.monotonic() < deadline:
            self.proc.poll()
            if self.proc.returncode is not None and not self._signal_group(0):
                break
            time.sleep(0.02)
        else:
            self._signal_group(signal.SIGKILL)
        try:
            self._status = self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            self._status = None
        # a member that survived SIGKILL's delivery race: ask once more, then stop watching
        if self._signal_group(0):
            self._signal_group(signal.SIGKILL)
        self._stopped = True
        with _lock:
            if self in _children:
                _children.remove(self)
        _tell(f"-{self.pgid}")
        return self._status

    def tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the log file ('' without one)."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip("\n").splitlines()[-lines:]) if lines > 0 else ""


def _start_watchdog() -> None:
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is None:
        return
    _watchdog = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(os.getpid()), str(_GRACE_S),
         "llmtop-watchdog"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd="/", start_new_session=True)
    with _lock:
        for c in _children:
            _tell(f"+{c.pgid}")
        for d in _temp_dirs:
            _tell(f"d{d}")


def _tell(line: str) -> None:
    """Send one line to the watchdog (best effort)."""
    w = _watchdog
    if w is None or w.stdin is None or os.getpid() != _owner_pid:
        return
    try:
        w.stdin.write(line.encode("utf-8", "surrogateescape") + b"\n")
        w.stdin.flush()
    except (OSError, ValueError):
        pass


def _register_atexit() -> None:
    global _atexit_done
    if not _atexit_done:
        atexit.register(stop_all)
        _atexit_done = True


def spawn(argv: Sequence[str] | str, *, shell: bool = False, env: Mapping[str, str] | None = None,
          cwd: str | None = None, log_path: str | None = None, pass_fds: Sequence[int] = (),
          inherit_output: bool = False) -> Child:
    """Start ``argv`` in its own process group; it ends when llmtop ends.

    stdin is ``/dev/null``; stdout and stderr go to ``log_path`` (appended) or nowhere
    (``inherit_output``: to llmtop's own, for debugging). ``pass_fds`` are kept open in the
    child. Raises :class:`LlmtopError` when the program cannot be started.
    """
    if isinstance(argv, str) and not shell:
        argv = [argv]
    with _lock:
        _register_atexit()
        try:
            _start_watchdog()
        except OSError:  # pragma: no cover - no interpreter to run it: children still stop
            pass       # at exit and on signals, only not after SIGKILL
        log = open(log_path, "ab") if log_path else None  # noqa: SIM115 - closed below
        out: int | object | None = None if inherit_output else (log or subprocess.DEVNULL)
        try:
            proc = subprocess.Popen(
                argv, shell=shell, env=dict(env) if env is not None else None, cwd=cwd,
                stdin=subprocess.DEVNULL, stdout=out,  # type: ignore[arg-type]
                stderr=None if inherit_output else subprocess.STDOUT,
                start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds))
        except OSError as exc:
            name = argv if isinstance(argv, str) else (argv[0] if argv else "")
            raise LlmtopError(f"cannot start {name}: {exc.strerror or exc}") from exc
        finally:
            if log is not None:
                log.close()
        child = Child(proc, log_path)
        _children.append(child)
        _tell(f"+{child.pgid}")
    return child


def temp_dir(prefix: str = "llmtop-") -> str:
    """A new temporary folder, removed by :func:`stop_all`, at exit and after SIGKILL."""
    path = tempfile.mkdtemp(prefix=prefix)
    with _lock:
        _register_atexit()
        try:
            _start_watchdog()
        except OSError:  # pragma: no cover
            pass
        _temp_dirs.append(path)
        _tell(f"d{path}")
    return path


def remove_temp_dir(path: str) -> None:
    """Remove a :func:`temp_dir` folder now (idempotent)."""
    shutil.rmtree(path, ignore_errors=True)
    with _lock:
        if path in _temp_dirs:
            _temp_dirs.remove(path)
            _tell(f"r{path}")


def stop_all(timeout_s: float = 5.0) -> None:
    """Stop every running child (SIGTERM to all groups at once, SIGKILL after ``timeout_s``)
    and remove every temporary folder. Safe to call more than once.
    """
    if os.getpid() != _owner_pid:  # a forked copy of llmtop owns none of them
        return
    with _lock:
        children = list(_children)
        dirs = list(_temp_dirs)
    for c in children:
        if not c._stopped:
            c._signal_group(signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, timeout_s)
    for c in children:
        c.stop(max(0.0, deadline - time.monotonic()))
    for d in dirs:
        remove_temp_dir(d)


def _on_signal(signum: int, frame: object) -> None:
    global _exiting
    code = 128 + signum
    if _exiting:  # a second signal while stopping: leave now
        os._exit(code)
    _exiting = True
    stop_all()
    # The SystemExit below unwinds the program (terminal restored, recordings closed). Should
    # something swallow it (a loop that catches BaseException), leave anyway in a while.
    timer = threading.Timer(5.0, os._exit, (code,))
    timer.daemon = True
    timer.start()
    raise SystemExit(code)


def install_exit_handlers() -> None:
    """SIGHUP and SIGTERM: :func:`stop_all`, then exit with 128 + the signal number.

    Idempotent. A signal whose handler is not the default one is left alone (``nohup``
    ignores SIGHUP; an asyncio loop's ``add_signal_handler`` replaces these later and then
    its own clean-up and the exit-time :func:`stop_all` do the work). Does nothing outside
    the main thread.
    """
    global _handlers_installed
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _register_atexit()
    for sig in (signal.SIGHUP, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, _on_signal)
    _handlers_installed = True
