"""Discovery: which inference engines and routers to watch on this machine, and what changes.

One entry point for every face (``find_targets``: TUI, ``--once``, ``record``, ``export``),
its notes said the same way (``notes``), the search again every 10 s (``rediscovery``).
Modules, each one idea:

- ``find``: the entry point (``Found``, ``find_targets``, ``search_machine``)
- ``search``: the search of this machine inside one time budget (default ports, processes)
- ``processes``: which command lines are engines, and the ports their flags name
- ``host`` / ``namespaces``: engine processes on the host's network / in other network
  namespaces (containers, pods), and where the host reaches them
- ``sockets``, ``sockdiag``, ``netns``: listening tables by netlink (in another namespace on a
  thread of its own) or ``/proc`` (``sources.procnet``, shared with GPU attribution)
- ``containers``: which container or pod a process runs in (cgroup shapes, names)
- ``probe``: is an engine answering at a port (the one prefix table, ``llmtop.families``)
- ``routers``: a router's serving port beside its metrics port; backends from worker URLs
- ``rediscovery``: the search again every 10 s; ``changes``: new and moved targets
- ``notes``: the sentences saying what a search could not read

Target strings (``llmtop.targets``) stay outside: they are what a user types (flags, TOML,
router worker URLs), read by settings and the load probe too, with no search in them.

Importing this package loads only the light parts (what the monitor uses at every tick); the
search loads when a search runs.
"""

from __future__ import annotations

from llmtop.discovery.changes import moved_targets, new_targets
from llmtop.discovery.find import Found, find_targets, search_machine
from llmtop.discovery.rediscovery import REDISCOVER_S, Rediscovery
from llmtop.discovery.routers import backend_targets

__all__ = [
    "REDISCOVER_S",
    "Found",
    "Rediscovery",
    "backend_targets",
    "find_targets",
    "moved_targets",
    "new_targets",
    "search_machine",
]
# No name here may be a module's name too (``search``): it would hide the module from
# ``monkeypatch.setattr("llmtop.discovery.search.discover", ...)``-style lookups.
