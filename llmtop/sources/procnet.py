"""Listening TCP sockets and their processes, from ``/proc`` (Linux only).

Public helpers, shared by autodiscovery and GPU process attribution::

    listening_sockets(proc_root="/proc", pids=None) -> dict[port, set[pid]]
    listen_table(proc_root="/proc") -> dict[inode, ListenSocket]
    socket_inodes(pid, proc_root="/proc") -> set[inode]
    ports_of_pid(pid, proc_root="/proc") -> set[port]
    cmdline(pid, proc_root="/proc") -> list[str]
    pids(proc_root="/proc") -> list[int]

Network namespaces (engines in containers and pods)::

    netns_of(pid, proc_root="/proc") -> inode | None      (``self`` for the reader's own)
    listen_table_of(pid, proc_root="/proc") -> dict[inode, ListenSocket] | None
    addresses_of(pid, proc_root="/proc") -> list[str] | None
    netns_names(dirs=NETNS_DIRS) -> dict[inode, name]

How: ``/proc/net/tcp`` and ``tcp6`` list sockets in state ``0A`` (LISTEN) with their inode;
``/proc/<pid>/fd/*`` links read ``socket:[<inode>]``. Other users' ``fd`` folders are not
readable without privileges, and ``/proc/net`` shows the reader's network namespace only:
results are then partial. Nothing here raises for a missing ``/proc``, a vanished process or
a permission error; it returns less. Every function is synchronous and cheap enough to call
once per discovery (read cmdlines first and scan ``fd`` only for interesting pids).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "NETNS_DIRS",
    "ListenSocket",
    "addresses_of",
    "cmdline",
    "listen_table",
    "listen_table_of",
    "listening_sockets",
    "netns_names",
    "netns_of",
    "pids",
    "ports_of_pid",
    "socket_inodes",
]

NETNS_DIRS: tuple[str, ...] = ("/run/netns", "/var/run/netns", "/run/docker/netns")
"""Where ``ip netns`` (and Docker) bind-mount named network namespaces."""

_LISTEN = "0A"


@dataclass(frozen=True, slots=True)
class ListenSocket:
    """One listening TCP socket."""

    ip: str
    """Bound address: ``0.0.0.0``, ``127.0.0.1``, ``::``, ``::1``..."""
    port: int
    inode: int
    v6: bool


def _hex_ip(h: str) -> str:
    """Kernel hex (host byte order per 32-bit word) -> dotted / colon notation."""
    raw = bytes.fromhex(h)
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]  # little-endian words
    b = b"".join(words)
    if len(b) == 4:
        return ".".join(str(x) for x in b)
    return str(ipaddress.IPv6Address(b))


def listen_table(proc_root: str | os.PathLike[str] = "/proc") -> dict[int, ListenSocket]:
    """Every LISTEN socket in ``<proc_root>/net/tcp`` and ``tcp6``, keyed by inode."""
    return _table(Path(proc_root, "net")) or {}


def listen_table_of(pid: int, proc_root: str | os.PathLike[str] = "/proc", *,
                    files: tuple[str, ...] = ("tcp", "tcp6")) -> dict[int, ListenSocket] | None:
    """The LISTEN sockets of ``pid``'s network namespace (``/proc/<pid>/net/tcp{,6}``, or
    only ``files``: each read walks the kernel's whole socket hash, however few sockets the
    namespace has, so ask only for the files needed); None when none can be read (the process
    is gone, or /proc hides it)."""
    return _table(Path(proc_root, str(pid), "net"), files)


def _table(net: Path, files: tuple[str, ...] = ("tcp", "tcp6")
           ) -> dict[int, ListenSocket] | None:
    out: dict[int, ListenSocket] = {}
    read = False
    for name, v6 in (("tcp", False), ("tcp6", True)):
        if name not in files:
            continue
        try:
            lines = (net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        read = True
        for line in lines:
            f = line.split()
            if len(f) < 10 or f[3] != _LISTEN:
                continue
            try:
                hip, hport = f[1].split(":")
                inode = int(f[9])
                sock = ListenSocket(_hex_ip(hip), int(hport, 16), inode, v6)
            except ValueError:
                continue
            if inode:
                out[inode] = sock
    return out if read else None


def netns_of(pid: int | str, proc_root: str | os.PathLike[str] = "/proc") -> int | None:
    """Inode of ``pid``'s network namespace (``ns/net`` reads ``net:[<inode>]``); None when
    not permitted (another user's process without root) or gone."""
    try:
        link = os.readlink(os.path.join(os.fspath(proc_root), str(pid), "ns", "net"))
    except OSError:
        return None
    if link.startswith("net:[") and link.endswith("]"):
        try:
            return int(link[5:-1])
        except ValueError:
            return None
    return None


def addresses_of(pid: int | str, proc_root: str | os.PathLike[str] = "/proc"
                 ) -> list[str] | None:
    """The addresses of ``pid``'s network namespace other than loopback, in the kernel's
    order: IPv4 from ``net/fib_trie`` (``/32 host LOCAL`` entries), global IPv6 from
    ``net/if_inet6``. None when neither can be read."""
    base = Path(proc_root, str(pid), "net")
    out: list[str] = []
    read = False
    try:
        trie = (base / "fib_trie").read_text()
        read = True
    except OSError:
        trie = ""
    last = None
    for line in trie.splitlines():
        s = line.strip()
        if s.startswith("|-- "):
            last = s[4:]
        elif (s == "/32 host LOCAL" and last and not last.startswith("127.")
              and last not in out):
            out.append(last)
    try:
        v6 = (base / "if_inet6").read_text()
        read = True
    except OSError:
        v6 = ""
    for line in v6.splitlines():
        f = line.split()
        if len(f) >= 6 and f[3] == "00" and len(f[0]) == 32:  # scope global
            try:
                ip = str(ipaddress.IPv6Address(bytes.fromhex(f[0])))
            except ValueError:
                continue
            if ip not in out:
                out.append(ip)
    return out if read else None


def netns_names(dirs: tuple[str, ...] = NETNS_DIRS) -> dict[int, str]:
    """``{namespace inode: name}`` of the bind-mounted namespaces in ``dirs`` (``ip netns
    add NAME`` makes ``/run/netns/NAME``); an unreadable folder adds nothing."""
    out: dict[int, str] = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            try:
                out.setdefault(os.stat(os.path.join(d, name)).st_ino, name)
            except OSError:
                continue
    return out


def pids(proc_root: str | os.PathLike[str] = "/proc") -> list[int]:
    """Numeric entries of ``proc_root`` (the visible processes)."""
    try:
        return sorted(int(e) for e in os.listdir(proc_root) if e.isdigit())
    except OSError:
        return []


def cmdline(pid: int, proc_root: str | os.PathLike[str] = "/proc") -> list[str]:
    """argv of ``pid`` ([] when unreadable or a kernel thread)."""
    try:
        raw = Path(proc_root, str(pid), "cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def socket_inodes(pid: int, proc_root: str | os.PathLike[str] = "/proc") -> set[int]:
    """Inodes of the sockets ``pid`` holds open (empty when not permitted)."""
    fd_dir = os.path.join(os.fspath(proc_root), str(pid), "fd")
    out: set[int] = set()
    try:
        entries = os.listdir(fd_dir)
    except OSError:
        return out
    for e in entries:
        try:
            link = os.readlink(os.path.join(fd_dir, e))
        except OSError:
            continue
        if link.startswith("socket:["):
            try:
                out.add(int(link[8:-1]))
            except ValueError:
                pass
    return out


def ports_of_pid(
    pid: int,
    proc_root: str | os.PathLike[str] = "/proc",
    *,
    table: dict[int, ListenSocket] | None = None,
) -> set[int]:
    """TCP ports ``pid`` listens on (pass ``table`` from ``listen_table`` to reuse it)."""
    tab = listen_table(proc_root) if table is None else table
    return {tab[i].port for i in socket_inodes(pid, proc_root) if i in tab}


def listening_sockets(
    proc_root: str | os.PathLike[str] = "/proc", pids: list[int] | None = None
) -> dict[int, set[int]]:
    """``{port: {pid, ...}}`` for every LISTEN socket whose owner is visible.

    ``pids`` limits the ``fd`` scan (all visible processes by default). A socket shared by
    a parent and its forked children lists every holder. Ports whose owner cannot be seen
    are left out.
    """
    tab = listen_table(proc_root)
    out: dict[int, set[int]] = {}
    if not tab:
        return out
    for pid in _all_pids(proc_root) if pids is None else pids:
        for inode in socket_inodes(pid, proc_root):
            s = tab.get(inode)
            if s is not None:
                out.setdefault(s.port, set()).add(pid)
    return out


_all_pids = pids
