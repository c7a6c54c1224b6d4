"""Each network namespace's listening table: netlink ``sock_diag`` first, ``/proc`` else.

- ``own_table(proc_root)``: the listening sockets of our own namespace.
- ``read_tables(first, proc_root, notes)``: the table of each namespace, read through one of
  its processes: by sock_diag as root (``discovery.sockdiag``), else its IPv4
  ``/proc/<pid>/net/tcp``, read side by side (each read walks the kernel's whole socket hash).
- A namespace sock_diag could not be read in (``NamespaceError``) is read from ``/proc``, and
  said once in ``notes`` (``discovery.notes``).
"""

from __future__ import annotations

import os
import struct

from llmtop.discovery import notes as said
from llmtop.discovery import sockdiag
from llmtop.discovery.netns import NamespaceError
from llmtop.sources import procnet
from llmtop.sources.procnet import ListenSocket

__all__ = ["diag", "own_table", "read_tables"]

Table = dict[int, ListenSocket]


def own_table(proc_root: str | os.PathLike[str]) -> Table:
    """Our own namespace's listening sockets (sock_diag on the real ``/proc``)."""
    table = diag(None, proc_root) if os.fspath(proc_root) == "/proc" else None
    return table if table is not None else procnet.listen_table(proc_root)


def diag(pid: int | None, proc_root: str | os.PathLike[str],
         errors: list[str] | None = None) -> Table | None:
    """The listening table of ``pid``'s namespace (ours: None) by sock_diag, or None; why a
    read inside another namespace failed is appended to ``errors``."""
    path = None if pid is None else os.path.join(os.fspath(proc_root), str(pid), "ns", "net")
    try:
        return sockdiag.listen_table(path)
    except (NamespaceError, OSError, ValueError, struct.error) as exc:
        if errors is not None:
            errors.append(f"{type(exc).__name__}: {exc}")
        return None


def read_tables(first: dict[object, int], proc_root: str | os.PathLike[str],
                notes: list[str] | None = None) -> dict[object, Table | None]:
    """Each namespace's listening table (``first``: namespace key -> a pid in it)."""
    if os.fspath(proc_root) == "/proc":
        errors: list[str] = []
        fast = {k: diag(pid, proc_root, errors) for k, pid in first.items()}
        if errors and notes is not None:
            notes.append(said.netlink_failed(len(errors), errors[0]))
        if all(t is not None for t in fast.values()):
            return fast
    if len(first) <= 1:
        return {k: procnet.listen_table_of(pid, proc_root, files=("tcp",))
                for k, pid in first.items()}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(first))) as pool:
        got = pool.map(lambda pid: procnet.listen_table_of(pid, proc_root, files=("tcp",)),
                       first.values())
        return dict(zip(first, got, strict=True))
