"""Small /proc readers: process names, command lines, parents and listening sockets.

Linux only; on other systems (or where /proc is not readable) every reader returns None or
an empty result and never raises. Used by GPU process attribution; discovery may reuse them.

    listening_ports()        {port: {socket inode, ...}} from /proc/net/tcp and tcp6 (LISTEN)
    socket_owners(inodes)    {inode: {pid, ...}} by scanning /proc/<pid>/fd (one pass)
    read_comm / read_cmdline / read_ppid / pid_exists
"""

from __future__ import annotations

import os
from collections.abc import Iterable

__all__ = [
    "PROC",
    "listening_ports",
    "pid_exists",
    "read_cmdline",
    "read_comm",
    "read_ppid",
    "socket_owners",
]

PROC = "/proc"
_LISTEN = "0A"


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


def listening_ports(proc: str = PROC) -> dict[int, set[int]]:
    """Listening TCP sockets of this network namespace: ``{port: {inode, ...}}``."""
    out: dict[int, set[int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{name}", encoding="ascii", errors="replace") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN:
                continue
            try:
                port = int(cols[1].rsplit(":", 1)[1], 16)
                inode = int(cols[9])
            except (IndexError, ValueError):
                continue
            if inode:
                out.setdefault(port, set()).add(inode)
    return out


def _pids(proc: str) -> list[int]:
    try:
        return [int(d) for d in os.listdir(proc) if d.isdigit()]
    except OSError:
        return []


def socket_owners(inodes: Iterable[int], proc: str = PROC) -> dict[int, set[int]]:
    """Which pids hold each socket inode (one scan of ``/proc/*/fd``).

    Processes whose fds we may not read (other users, without privileges) are skipped,
    so an inode can stay unowned: callers treat that as "unknown", never as "nobody".
    """
    want = {f"socket:[{i}]": i for i in inodes}
    found: dict[int, set[int]] = {}
    if not want:
        return found
    for pid in _pids(proc):
        fd_dir = f"{proc}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            inode = want.get(link)
            if inode is not None:
                found.setdefault(inode, set()).add(pid)
    return found
