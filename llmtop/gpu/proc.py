"""Small /proc readers for GPU processes: names, command lines, parents.

Linux only; elsewhere (or where /proc is not readable) every reader returns None and never
raises. Listening sockets come from ``llmtop.sources.procnet`` (shared with discovery).

    read_comm / read_cmdline / read_ppid / read_owner / user_name / pid_exists /
    in_initial_pid_namespace
"""

from __future__ import annotations

import os
from functools import lru_cache

__all__ = [
    "PROC",
    "in_initial_pid_namespace",
    "pid_exists",
    "read_cmdline",
    "read_comm",
    "read_owner",
    "read_ppid",
    "user_name",
]

PROC = "/proc"
_INIT_PID_NS = "pid:[4026531836]"  # PROC_PID_INIT_INO (0xEFFFFFFC): the kernel's initial namespace


def in_initial_pid_namespace(proc: str = PROC) -> bool | None:
    """True on the host, False inside a container's own PID namespace, None if unknown.

    The NVIDIA driver does not translate pids into PID namespaces: NVML always reports host
    pids. Inside a nested namespace a matching ``/proc/<pid>`` is a different process.
    """
    try:
        return os.readlink(f"{proc}/self/ns/pid") == _INIT_PID_NS
    except OSError:
        return None


def pid_exists(pid: int, proc: str = PROC) -> bool:
    """True when ``/proc/<pid>`` exists in this PID namespace."""
    return pid > 0 and os.path.exists(f"{proc}/{pid}")


def read_comm(pid: int, proc: str = PROC) -> str | None:
    """``/proc/<pid>/comm`` (the kernel's 15-character name), or None."""
    try:
        with open(f"{proc}/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


def read_cmdline(pid: int, proc: str = PROC) -> list[str] | None:
    """argv from ``/proc/<pid>/cmdline``; ``[]`` for kernel threads and zombies; None if gone.

    A process that rewrote its title (setproctitle: ``VLLM::EngineCore``) shows as one
    string with spaces; it is returned as one element.
    """
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if not raw:
        return []
    parts = raw.split(b"\0")
    if parts and parts[-1] == b"":
        parts.pop()
    return [p.decode("utf-8", "replace") for p in parts]


def read_ppid(pid: int, proc: str = PROC) -> int | None:
    """Parent pid from ``/proc/<pid>/stat``, or None."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The name (field 2) is in parentheses and may contain spaces or ')'.
    tail = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(tail[1])
    except (IndexError, ValueError):
        return None


@lru_cache(maxsize=256)
def user_name(uid: int) -> str:
    """The user name of ``uid`` (the passwd database, cached), else the uid as text."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def read_owner(pid: int, proc: str = PROC) -> str | None:
    """The user owning ``/proc/<pid>`` (the process's real owner), or None if gone."""
    try:
        return user_name(os.stat(f"{proc}/{pid}").st_uid) if pid > 0 else None
    except OSError:
        return None
