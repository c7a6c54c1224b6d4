"""Side-poll answers into the store: one small function per ``RawScrape.kind``.

- ``slots``: llama-server's in-flight requests into the request window (a failed poll is
  counted, ``RequestWindow.slots_errors``).
- ``workers``: a router's roles per backend into the router history (``RouterBook``).
- ``health``: the health code of a row that may be stuck, kept with its target's history.

Adding a side poll: a kind in ``model.SCRAPE_KINDS``, its fetch in the scraper, its entry in
the monitor's poll table (``monitor.sidepolls``), and one function here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from llmtop.history.request_window import RequestWindow
from llmtop.history.routers import RouterBook
from llmtop.history.target import TargetHistory
from llmtop.model import SCRAPE_HEALTH, SCRAPE_SLOTS, SCRAPE_WORKERS, RawScrape
from llmtop.sources.health import health_status
from llmtop.sources.router_workers import roles_of

__all__ = ["INGEST", "SideStore", "ingest_side"]


class SideStore(Protocol):
    """What of the store the side polls change (``history.store.Store``)."""

    requests: RequestWindow
    routers: RouterBook

    def history_of(self, name: str) -> TargetHistory | None: ...

    def note_time(self, t_mono: float, t_wall: float) -> None: ...


def _slots(store: SideStore, raw: RawScrape) -> None:
    if raw.status == "ok":
        store.requests.set_slots(raw.target, raw.t_wall, raw.body)
    else:
        store.requests.slots_errors += 1


def _workers(store: SideStore, raw: RawScrape) -> None:
    if raw.status == "ok":
        store.routers.set_roles(raw.target, roles_of(raw.body))


def _health(store: SideStore, raw: RawScrape) -> None:
    ts = store.history_of(raw.target)
    if ts is not None:  # a target the store does not know has no row to judge
        ts.health.append((raw.t_mono, health_status(raw)))
        store.note_time(raw.t_mono, raw.t_wall)


INGEST: dict[str, Callable[[SideStore, RawScrape], None]] = {
    SCRAPE_SLOTS: _slots,
    SCRAPE_WORKERS: _workers,
    SCRAPE_HEALTH: _health,
}
"""Side-poll kind -> how its answer changes the store."""


def ingest_side(store: SideStore, raw: RawScrape) -> None:
    """Keep one side poll's answer (``INGEST`` by ``raw.kind``); an unknown kind is ignored."""
    ingest = INGEST.get(raw.kind)
    if ingest is not None:
        ingest(store, raw)
