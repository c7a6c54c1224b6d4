"""Listening TCP sockets of a network namespace through netlink ``sock_diag``.

Reading ``/proc/<pid>/net/tcp`` walks the kernel's whole socket hash, however few sockets
the namespace has; a ``sock_diag`` dump asking for LISTEN only walks the listening hash. A
netlink socket belongs to the namespace it was made in (``discovery.netns`` makes it there).

- ``listen_table(ns_path=None) -> dict[inode, ListenSocket] | None``: ``ns_path`` None is
  our own namespace (no root needed, as for ``ss``). None whenever it cannot (no root for
  another namespace, no ``setns``, an old kernel, an error answer): the caller reads /proc.
  ``NamespaceError`` when entering the namespace failed (``discovery.netns``).
- ``request(family)`` and ``parse_reply(data)``: the dump request and the reading of one
  ``recv`` of its answer (pure: tested on a recorded reply).
"""

from __future__ import annotations

import ipaddress
import socket
import struct

from llmtop.discovery.netns import netlink_socket_in
from llmtop.sources.procnet import ListenSocket

__all__ = ["NETLINK_SOCK_DIAG", "listen_table", "parse_reply", "request"]

NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_DONE, _NLMSG_ERROR = 3, 2
_TCP_LISTEN = 10


def request(family: int) -> bytes:
    """A ``SOCK_DIAG_BY_FAMILY`` dump request for ``family``'s LISTEN TCP sockets."""
    req = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)
    req += b"\0" * 48  # inet_diag_sockid: ports, addresses, interface, cookie: any
    hdr = struct.pack("=IHHII", 16 + len(req), _SOCK_DIAG_BY_FAMILY,
                      _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0)
    return hdr + req


def parse_reply(data: bytes) -> tuple[list[ListenSocket], bool] | None:
    """The LISTEN sockets in one ``recv`` of a dump's answer and whether the dump is done;
    None for an error answer or a malformed message."""
    out: list[ListenSocket] = []
    off = 0
    while off + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, off)
        if length < 16:
            return None
        if kind == _NLMSG_DONE:
            return out, True
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
    return out, False


def _dump(sock: socket.socket, family: int) -> list[ListenSocket] | None:
    sock.sendall(request(family))
    out: list[ListenSocket] = []
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return None
        got = parse_reply(data)
        if got is None:
            return None
        out += got[0]
        if got[1]:
            return out


def listen_table(ns_path: str | None = None) -> dict[int, ListenSocket] | None:
    """Every LISTEN TCP socket (v4 and v6) of the namespace at ``ns_path`` (e.g.
    ``/proc/<pid>/ns/net``), keyed by inode; None when sock_diag cannot be used."""
    if ns_path is None:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)
        except OSError:
            return None
    else:
        made = netlink_socket_in(ns_path, NETLINK_SOCK_DIAG)
        if made is None:
            return None
        sock = made
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
