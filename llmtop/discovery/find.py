"""The one entry point every face uses: the targets to watch, and what the search could not read.

- ``find_targets(config) -> Found``: the given targets, else (discovery on) a search of this
  machine; ``Found.notes`` are the search's notes (``discovery.notes``), ``Found.searching``
  says the search goes on (no TARGET given).
- ``search_machine(config) -> Found``: one search, whatever was given (``Rediscovery`` every 10 s).
- A watching face's monitor takes the search just made as its first, notes included
  (``Rediscovery.mark_searched(found.notes)``).

What each face does with no target found is in ``docs/discovery.md``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from llmtop.config import Config, Target

__all__ = ["Found", "find_targets", "search_machine"]


@dataclass(frozen=True, slots=True)
class Found:
    """The targets to watch and what the search that found them could not read."""

    targets: tuple[Target, ...]
    notes: tuple[str, ...] = ()
    """One sentence each, saying what to do (``discovery.notes``)."""
    searching: bool = False
    """No TARGET was given and discovery is on: a watching face searches again every 10 s."""

    def config(self, config: Config) -> Config:
        """``config`` watching these targets."""
        return dataclasses.replace(config, targets=self.targets)


async def search_machine(config: Config) -> Found:
    """Search this machine now (``discovery.search.discover``; never raises)."""
    from llmtop.discovery.search import discover

    notes: list[str] = []
    found = await discover(config, notes=notes)
    return Found(tuple(found), tuple(notes), searching=True)


async def find_targets(config: Config) -> Found:
    """The targets to watch: those given, else (discovery on) what a search finds."""
    if config.targets or not config.discover:
        return Found(tuple(config.targets))
    return await search_machine(config)
