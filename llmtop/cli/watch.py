"""What the faces that watch until stopped (``record``, ``export``) share: targets and monitor.

- ``start_targets(config, log)``: the targets (``discovery.find_targets``), its notes logged
  once; with none found while the search goes on, says so (the face goes on searching).
- ``build_monitor(config, found, demo, store=None, receiver=None)``: the one place these
  faces build their ``Monitor``: searching again every 10 s when no TARGET was given, the
  search just made counted as its first, its notes in the event log too, and the span
  receiver given to it.
- ``nothing_to_watch(found)``: no target and no search (``--no-discover``): the face exits 1
  with ``NO_TARGETS_MESSAGE`` (``docs/discovery.md``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from llmtop.config import Config

if TYPE_CHECKING:
    from llmtop.discovery import Found
    from llmtop.monitor import Monitor

__all__ = ["build_monitor", "nothing_to_watch", "start_targets"]

SEARCHING = "no inference engines found yet on this machine: searching again every 10 s"
"""Said by a watching face that found nothing and goes on searching."""


async def start_targets(config: Config, log: logging.Logger) -> Found:
    """The targets to watch (given or found); the search's notes logged once each."""
    from llmtop.discovery import find_targets
    from llmtop.discovery.notes import say

    found = await find_targets(config)
    say(found.notes, write=log.warning)
    if not found.targets and found.searching:
        log.warning(SEARCHING)
    return found


def nothing_to_watch(found: Found) -> bool:
    """No target, and none will be searched for."""
    return not found.targets and not found.searching


def build_monitor(config: Config, found: Found, demo: Any = None, *,
                  store: Any = None, receiver: Any = None) -> Monitor:
    """The monitor of a watching face, for ``found.config(config)``; ``receiver``: the span
    receiver (``--otlp-listen``), closed with the monitor."""
    from llmtop.monitor import Monitor

    monitor = Monitor.from_config(found.config(config), demo, store=store,
                                  rediscover=found.searching, receiver=receiver)
    if monitor.rediscovery is not None:  # the search just made is its first
        monitor.rediscovery.mark_searched(found.notes)
    return monitor
