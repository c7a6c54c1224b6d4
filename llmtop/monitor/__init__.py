"""The monitor: one tick = scrape every target in parallel + one GPU sample + side polls.

Its parts, each readable and testable alone:

- ``tick``: ``Monitor``, its wiring and the tick (what runs, in which order, what is fed).
- ``prefetch``: the start-up fetch in its own thread, taken by the first tick.
- ``sidepolls``: one side-poll mechanism; ``/slots``, ``/workers`` and health are entries.
- ``targetset``: the targets and how they change (searches, moved pods, name clashes,
  router backends and their life cycle, GPU re-targeting).
- ``feed``: the sink and the store, errors as event-log lines.
- ``ports``: the collaborators' interfaces (scraper, GPU sampler, span receiver).
"""

from __future__ import annotations

from llmtop.monitor.feed import THREAD_PARSE_BYTES
from llmtop.monitor.tick import Monitor

__all__ = ["THREAD_PARSE_BYTES", "Monitor"]
