"""Listening TCP sockets of another network namespace through netlink ``sock_diag``.

Reading ``/proc/<pid>/net/tcp`` walks the kernel's whole socket hash (~20 ms per file on a VM,
however few sockets the namespace has); a ``sock_diag`` dump asking for LISTEN only walks
the listening hash (well under a millisecond). A netlink socket belongs to the namespace it
was made in, so the calling thread enters the namespace (``setns``, root only), makes the
socket, and goes back at once.

    listen_table(ns_path=None) -> dict[inode, ListenSocket] | None

``ns_path`` None: our own namespace (no root needed, as for ``ss``). None whenever it cannot
(no root for another namespace, no ``setns``, an old kernel): the caller reads /proc.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
import struct
import threading

from llmtop.sources.procnet import ListenSocket

__all__ = ["listen_table"]

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_TCP_LISTEN = 10
_CLONE_NEWNET = 0x40000000
_lock = threading.Lock()
_libc: ctypes.CDLL | None = None


def _setns(fd: int) -> bool:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return int(_libc.setns(fd, _CLONE_NEWNET)) == 0
    except (OSError, AttributeError):
        return False


def _socket_in(ns_path: str | None) -> socket.socket | None:
    """A netlink sock_diag socket made inside the namespace at ``ns_path`` (ours: None)."""
    if ns_path is None:
        try:
            return socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
        except OSError:
            return None
    if os.geteuid() != 0:
        return None
    try:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    except OSError:
        return None
    try:
        target = os.open(ns_path, os.O_RDONLY)
    except OSError:
        os.close(own)
        return None
    sock = None
    try:
        with _lock:  # one thread at a time away from home (the pool's others wait)
            if not _setns(target):
                return None
            try:
                sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
            except OSError:
                sock = None
            finally:
                if not _setns(own):  # never leave a thread in another namespace
                    raise OSError("setns back to our own network namespace failed")
        return sock
    finally:
        os.close(own)
        os.close(target)


def _dump(sock: socket.socket, family: int) -> list[ListenSocket] | None:
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
    req += b"\0" * 48  # inet_diag_sockid: ports, addresses, interface, cookie: any
    hdr = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY,
                      _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
    sock.sendall(hdr + req)
    out: list[ListenSocket] = []
    while True:
        data = sock.recv(1 << 16)
        off = 0
        while off + 16 <= len(data):
            length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
            if length < 16:
                return None
            if kind == _NLMSG_DONE:
                return out
            if kind == _NLMSG_ERROR:
                return None
            body = data[off + 16: off + length]
            if len(body) >= 72:
                fam, state = body[0], body[1]
                sport = struct.unpack_from(">H", body, 4)[0]
                raw = body[8:24] if fam == socket.AF_INET6 else body[8:12]
                inode = struct.unpack_from("=I", body, 68)[0]
                if state == _TCP_LISTEN and inode:
                    ip = str(ipaddress.ip_address(bytes(raw)))
                    out.append(ListenSocket(ip, sport, inode, fam == socket.AF_INET6))
            off += (length + 3) & ~3
        if not data:
            return None


def listen_table(ns_path: str | None = None) -> dict[int, ListenSocket] | None:
    """Every LISTEN TCP socket (v4 and v6) of the namespace at ``ns_path`` (e.g.
    ``/proc/<pid>/ns/net``), keyed by inode; None when sock_diag cannot be used."""
    sock = _socket_in(ns_path)
    if sock is None:
        return None
    try:
        sock.settimeout(1.0)
        out: dict[int, ListenSocket] = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            got = _dump(sock, family)
            if got is None:
                return None
            out.update((s.inode, s) for s in got)
        return out
    except OSError:
        return None
    finally:
        sock.close()
