"""Recordings made before scrapes said their kind: the kind read from the URL, once, at load.

- Only ``record/`` guesses from a URL, and only for a recording whose header lacks
  ``KINDS_FLAG``; everything else dispatches on ``RawScrape.kind``.
- The order is the order the store once tested: ``/workers``, ``/slots``, a health path.
"""

from __future__ import annotations

from llmtop.model import SCRAPE_HEALTH, SCRAPE_METRICS, SCRAPE_SLOTS, SCRAPE_WORKERS
from llmtop.sources.health import is_health_url
from llmtop.sources.router_workers import WORKERS_PATH

__all__ = ["KINDS_FLAG", "kind_from_url"]

KINDS_FLAG = "scrape_kinds"
"""Header key of a recording whose side polls say their kind (``kd``; none: metrics). A
recording without it is older: its kinds are read from the URLs (``kind_from_url``)."""


def kind_from_url(url: str) -> str:
    """The ``RawScrape.kind`` an old recording's scrape of ``url`` had."""
    if url.endswith(WORKERS_PATH):
        return SCRAPE_WORKERS
    if url.endswith("/slots"):
        return SCRAPE_SLOTS
    if is_health_url(url):
        return SCRAPE_HEALTH
    return SCRAPE_METRICS
