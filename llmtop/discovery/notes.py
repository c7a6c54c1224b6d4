"""Discovery's notes: what a search could not read, one sentence each, saying what to do.

- The sentences are made here (``unreadable``, ``no_root``, ``loopback``, ``no_names``,
  ``netlink_failed``), so every face says the same words.
- ``say(notes, write=None, err=None)``: how a face says them, once each, right after the
  first search: ``llmtop: <note>`` on stderr, or through ``write`` (``record`` and
  ``export`` log them).
  A face that watches (TUI, ``record``, ``export``) also has them in its event log
  (``Rediscovery.notes``), where each is said once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TextIO

__all__ = ["loopback", "netlink_failed", "no_names", "no_root", "say", "unreadable"]


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def unreadable(n: int) -> str:
    """Engine processes whose namespace could not be read at all."""
    return (f"{_plural(n, 'engine process', 'engine processes')} in other network namespaces "
            "could not be read: run as root, or give their addresses")


def no_root(n: int) -> str:
    """Engine processes found by their command lines' ports, without root."""
    return (f"{_plural(n, 'engine process', 'engine processes')} in other network namespaces "
            "were read without their sockets and namespace names (found by their command "
            "lines' ports): run as root to see which namespace each is")


def loopback(n: int) -> str:
    """Engines listening on their own namespace's loopback only."""
    return (("1 engine in another network namespace listens on its own loopback only"
             if n == 1 else f"{n} engines in other network namespaces listen on their own "
             "loopback only")
            + ", which this host cannot reach: publish the port or give the address")


def no_names(where: Iterable[str]) -> str:
    """Container names that could not be read."""
    return f"container names could not be read from {', '.join(sorted(where))}: run as root " \
           "to see them"


def netlink_failed(n: int, first: str) -> str:
    """Namespaces whose sockets netlink could not read (read from /proc instead)."""
    return (f"the sockets of {_plural(n, 'network namespace', 'network namespaces')} could "
            f"not be read through netlink ({first}): read from /proc instead")


def say(notes: Iterable[str], *, write: Callable[[str], object] | None = None,
        err: TextIO | None = None) -> None:
    """Say each note once: ``write(note)``, else ``llmtop: <note>`` on ``err`` (stderr)."""
    for note in dict.fromkeys(notes):
        if write is not None:
            write(note)
        else:
            print(f"llmtop: {note}", file=err if err is not None else sys.stderr)
