"""The monitor's collaborators as typed interfaces: the scraper, the GPU sampler, the spans.

- ``Scraper``: metrics scrapes, identity, and the side polls' fetches (``sources.scrape``).
- ``GpuSampler``: one GPU sample per tick (declared in ``gpu``, beside its samplers: NVML,
  the demo's, ``NullSampler``).
- ``SpanReceiver``: the OTLP receiver whose queued bodies each tick takes (``sources.otlp``).
- ``LogFollower``: engine logs read off the loop, drained by each tick (``sources.logs``).

The monitor calls every method plainly; a collaborator with nothing to do answers with a
no-op (``reidentify``, ``set_targets``, ``aclose``).
"""

from __future__ import annotations

from typing import Any, Protocol

from llmtop.config import Target
from llmtop.gpu import GpuSampler
from llmtop.model import LogLocation, RawLog, RawScrape, RawSpans

__all__ = ["GpuSampler", "LogFollower", "Scraper", "SpanReceiver"]


class Scraper(Protocol):
    """Fetches for the monitor; every fetch answers a ``RawScrape`` and never raises."""

    async def scrape(self, target: Target) -> RawScrape:
        """The target's metrics (``kind`` metrics)."""
        ...

    async def identify(self, target: Target) -> dict[str, Any]:
        """What the identity endpoints say (``{"host": ...}`` at least)."""
        ...

    def identity_pending(self, target_name: str) -> bool:
        """True while identity is asked in the background (it comes with the next scrape)."""
        ...

    def reidentify(self, target_name: str) -> None:
        """Ask identity again with the next scrape (a pod back at a new address)."""
        ...

    async def slots(self, target: Target) -> RawScrape:
        """llama-server's ``/slots`` (``kind`` slots)."""
        ...

    async def workers(self, target: Target) -> RawScrape:
        """A router's ``/workers`` from its serving URL (``kind`` workers)."""
        ...

    def health_url(self, target: Target, engine: str | None) -> str | None:
        """The target's health URL; None when it has none known."""
        ...

    async def health(self, target: Target, url: str) -> RawScrape:
        """One GET of ``url`` (``kind`` health)."""
        ...

    async def aclose(self) -> None:
        """Close connections and stop background work."""
        ...


class SpanReceiver(Protocol):
    """Request spans received since the last tick (``--otlp-listen``)."""

    def drain(self) -> list[RawSpans]:
        """The bodies queued since the last call, oldest first."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts for the requests screen (received, dropped, ...)."""
        ...

    def close(self) -> None: ...


class LogFollower(Protocol):
    """Engine logs followed off the loop (``sources.logs``); each tick takes what was read."""

    def follow(self, target: str, where: LogLocation) -> None:
        """Follow ``where`` for ``target`` (again, when it moved); an unreadable location
        answers one ``RawLog`` with its ``error`` at the next drain."""
        ...

    def forget(self, target: str) -> None:
        """Stop following ``target``'s log (the target was dropped)."""
        ...

    def drain(self) -> list[RawLog]:
        """What was read since the last call, one ``RawLog`` per target with news."""
        ...

    def close(self) -> None:
        """Stop every reader thread and child process (``journalctl``, a command)."""
        ...
