"""A netlink socket made inside another network namespace, on a thread that is never reused.

A netlink socket belongs to the namespace it was made in, so discovery makes it inside the
engine's namespace (``setns``, root only) and reads it from home. The rules:

- The switch runs on a thread started for it alone: it enters the namespace, makes the
  socket, goes back, and ends. No thread of a pool (nor the caller's) ever leaves home, so
  no ``except`` anywhere can hide a thread stranded in another namespace.
- When going back fails, that thread ends where it is, its socket is closed, and
  ``NamespaceError`` says so to the caller.
- A failure inside the namespace is a ``NamespaceError`` too (the caller says it in a note);
  None only means "cannot here": not root, no ``setns``, the namespace gone.
- One switch at a time.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from typing import cast

__all__ = ["NamespaceError", "netlink_socket_in"]

_CLONE_NEWNET = 0x40000000
_lock = threading.Lock()
_libc: ctypes.CDLL | None = None


class NamespaceError(Exception):
    """Work inside another network namespace failed (the thread that tried has ended)."""


def _setns(fd: int) -> bool:
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return int(_libc.setns(fd, _CLONE_NEWNET)) == 0
    except (OSError, AttributeError):
        return False


def netlink_socket_in(ns_path: str, protocol: int) -> socket.socket | None:
    """A netlink ``protocol`` socket made inside the network namespace at ``ns_path`` (e.g.
    ``/proc/<pid>/ns/net``); None when it cannot be done here; ``NamespaceError`` when it
    failed inside the namespace or the thread could not come back."""
    if os.geteuid() != 0:
        return None
    got: dict[str, object] = {}
    worker = threading.Thread(target=_make, args=(ns_path, protocol, got),
                              name="llmtop-netns", daemon=True)
    worker.start()
    worker.join()
    error = got.get("error")
    if isinstance(error, BaseException):
        raise NamespaceError(str(error)) from error
    return cast("socket.socket | None", got.get("socket"))


def _make(ns_path: str, protocol: int, got: dict[str, object]) -> None:
    """The thread's whole life: enter, make the socket, come back (or end away)."""
    try:
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    except OSError:
        return
    try:
        try:
            target = os.open(ns_path, os.O_RDONLY)
        except OSError:
            return
        try:
            _make_in(target, own, protocol, got)
        finally:
            os.close(target)
    except BaseException as exc:  # said to the caller; this thread ends here either way
        got["error"] = exc
    finally:
        os.close(own)


def _make_in(target: int, own: int, protocol: int, got: dict[str, object]) -> None:
    with _lock:
        if not _setns(target):
            return
        sock: socket.socket | None = None
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, protocol)
        except OSError as exc:
            got["error"] = exc
        finally:
            if not _setns(own):
                if sock is not None:
                    sock.close()
                got.pop("socket", None)
                raise NamespaceError("a thread could not return to llmtop's own network "
                                     "namespace (it was ended)")
        if sock is not None:
            got["socket"] = sock
