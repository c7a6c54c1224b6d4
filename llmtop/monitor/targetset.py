"""The target set: what the monitor scrapes, and how it changes while it runs.

- Engines a search found (``rediscover``): new ones added and named in the event log; one
  in a pod or container back at a new address keeps its row (``moved_targets``); a new pod
  at an address a moved one had gets a name of its own (``unclash``); discovery's notes
  are said once.
- Engines a search found in a container or pod that later searches no longer find and
  that no longer answer are dropped after ``FOUND_GRACE_S`` (a replaced pod: its
  successor is a row of its own). Engines the user named, and engines found outside a
  container, stay for ever (a crashed engine stays DOWN for the operator to see).
- Router backends: the worker URLs routers name become targets (``backend_targets``). One
  no router names any more is dropped after ``BACKEND_GRACE_S``; one that is down is asked
  less and less often (``next_scrape_in``) until it answers again.
- The GPU sampler is told the targets whenever they change (GPU memory is attributed to
  the engines found too).
- Logs: every target given, found, moved or added behind a router waits for its log to be
  found (``logs_wanted``, taken by the monitor, found off the loop); a dropped one's log is
  forgotten by the follower; a log that cannot be read is said once (``say``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.discovery import backend_targets, moved_targets, new_targets
from llmtop.history.store import Store
from llmtop.model import RawScrape
from llmtop.monitor.ports import GpuSampler, LogFollower, Scraper
from llmtop.topology.link import host_port

__all__ = ["BACKEND_GRACE_S", "BACKOFF_CAP_S", "FOUND_GRACE_S", "TargetSet", "next_scrape_in",
           "unclash"]

BACKEND_GRACE_S = 60.0
"""A backend no router names any more is dropped this long after it was last named: a router
re-listing its pool (a restart, a rolling update) names the same backends again within a few
refreshes, and a row that vanishes and comes back is worse than one that stays a minute."""

FOUND_GRACE_S = 300.0
"""A container or pod engine that searches no longer find, and that does not answer, is
dropped this long after a search last found it: long enough for an operator to see the DOWN
row of a replaced or deleted pod (the event log keeps the drop), short enough that a
cluster replacing pods all day does not pile up rows, scrapes and history."""

BACKOFF_CAP_S = 60.0
"""The longest wait between scrapes of a backend that stays down: a dead backend costs one
timed-out scrape a minute instead of one every tick, and is seen again within a minute of
coming back."""


def next_scrape_in(downs: int, interval_s: float) -> float:
    """Seconds until a backend that answered ``down`` that many times in a row is scraped
    again: one interval after the first, doubling after each, up to ``BACKOFF_CAP_S``."""
    return min(BACKOFF_CAP_S, interval_s * 2 ** max(0, downs - 1))


@dataclass(slots=True)
class _Backend:
    """A target added from a router's backend URL."""

    addr: tuple[str, int] | None
    named_at: float
    """When a router last named it (``llmtop.clock.monotonic``)."""
    downs: int = 0
    """``down`` answers in a row."""
    next_at: float | None = None
    """Not scraped before this time (None: every tick)."""


class TargetSet:
    """The monitor's targets and their changes (see the module docstring)."""

    def __init__(self, config: Config, store: Store, scraper: Scraper,
                 gpu: GpuSampler | None, *, now: Callable[[], float] | None = None,
                 logs: LogFollower | None = None) -> None:
        self.config = config
        self.logs = logs
        """The log follower (None: logs are not followed)."""
        self.store = store
        self.scraper = scraper
        self.gpu = gpu
        self.targets: list[Target] = list(config.targets)
        self.now = now if now is not None else (lambda: clock.monotonic())
        """The clock of the backends' grace and back-off (``llmtop.clock`` by default)."""
        self._said: set[str] = set()
        """Discovery's notes already in the event log (each is said once)."""
        self._backends: dict[str, _Backend] = {}
        self._found_at: dict[str, float] = {}
        """Container or pod engines found by a search: when a search last found each."""
        self._backends_seen: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        """The routers' backend URLs and the targets ``add_backends`` last looked at."""
        self._logs_wanted: list[Target] = list(self.targets) if logs is not None else []
        """Targets whose log is to be found (given, found, moved, behind a router)."""

    # ------------------------------------------------------------------ discovery
    def add_found(self, found: list[Target], notes: list[str], *,
                  searched: bool = False) -> list[str]:
        """Add the engines a search found that are not watched yet, each named in the log;
        a watched engine in a pod or container now at a new address keeps its row (it is
        scraped there); what the search could not read (``notes``) is said once.
        ``searched``: ``found`` is a whole search's answer, so a container or pod engine not
        in it is gone from this machine (dropped after ``FOUND_GRACE_S``). Returns the names
        dropped."""
        for note in notes:
            self.say(note)
        if found:
            self._add_found(found)
        return self._drop_gone(found, self.now()) if searched and self._found_at else []

    def _add_found(self, found: list[Target]) -> None:
        now = self.now()
        for old, new in moved_targets(self.targets, found):
            moved = dataclasses.replace(new, name=old.name)
            self.targets[self.targets.index(old)] = moved
            self.store.learn(moved)
            self._found_at[old.name] = now
            self.scraper.reidentify(old.name)
            self._want_log(moved)
            assert moved.container is not None
            self.store.event("info", old.name, f"{moved.container.label} is back at "
                             f"{moved.base_url} (restarted with a new address)")
        for t in new_targets(self.targets, unclash(self.targets, found)):
            self.targets.append(t)
            self.store.learn(t)
            self._want_log(t)
            if t.container is not None:
                self._found_at[t.name] = now
            where = f" ({t.container.label})" if t.container is not None else ""
            self.store.event("info", t.name, f"found on this machine{where} (autodiscovery)")
        if self.gpu is not None:  # GPU memory is attributed to the engines found too
            self.gpu.set_targets(self.targets)

    def _drop_gone(self, found: list[Target], now: float) -> list[str]:
        """Note which found engines this search found again; drop those not found for
        ``FOUND_GRACE_S`` whose latest scrape did not answer."""
        here = {host_port(t.base_url) for t in found}
        dropped = []
        for t in list(self.targets):
            at = self._found_at.get(t.name)
            if at is None:
                continue
            if host_port(t.base_url) in here:
                self._found_at[t.name] = now
                continue
            h = self.store.history_of(t.name)
            if now - at <= FOUND_GRACE_S or (h is not None and h.status == "ok"):
                continue
            del self._found_at[t.name]
            where = t.container.label if t.container is not None else t.base_url
            dropped.append(self._drop(t.name, f"{where} not found on this machine for "
                                              f"{FOUND_GRACE_S / 60:.0f} min and not answering"))
        self._retarget_gpus(dropped)
        return dropped

    def _drop(self, name: str, why: str) -> str:
        """Stop watching ``name``: out of the targets and the store, said in the event log."""
        self.targets[:] = [t for t in self.targets if t.name != name]
        self.store.forget(name)
        if self.logs is not None:
            self.logs.forget(name)
        self.store.event("info", name, f"dropped: {why}")
        return name

    def _retarget_gpus(self, dropped: list[str]) -> None:
        if dropped and self.gpu is not None:  # GPU memory is attributed to the rest
            self.gpu.set_targets(self.targets)

    def say(self, note: str) -> None:
        """One of discovery's notes into the event log, once."""
        if note not in self._said:
            self._said.add(note)
            self.store.event("warn", None, note)

    # ------------------------------------------------------------------ logs
    def _want_log(self, t: Target) -> None:
        if self.logs is not None:
            self._logs_wanted.append(t)

    def logs_wanted(self) -> list[Target]:
        """The targets whose log is to be found now (each once; the list is emptied)."""
        wanted, self._logs_wanted = self._logs_wanted, []
        return wanted

    def watched(self, name: str) -> bool:
        """True while ``name`` is one of the targets."""
        return any(t.name == name for t in self.targets)

    # ------------------------------------------------------------------ router backends
    def add_backends(self) -> list[str]:
        """Follow the backends routers name: add the new ones, drop the ones no router has
        named for ``BACKEND_GRACE_S``. Returns the names dropped."""
        urls = self.store.backend_urls()
        now = self.now()
        dropped = self._drop_unnamed(urls, now) if self._backends else []
        if not urls:
            return dropped
        key = (tuple(urls), tuple(t.base_url for t in self.targets))
        if key == self._backends_seen:  # the same routers' backends and targets: none new
            return dropped
        self._backends_seen = key
        for t in backend_targets(urls, self.targets, timeout_s=self.config.timeout_s,
                                 verify_tls=self.config.verify_tls):
            self.targets.append(t)
            self._want_log(t)
            self._backends[t.name] = _Backend(host_port(t.base_url), now)
            self.store.event("info", t.name, "found behind a router (its worker URL)")
        return dropped

    def _drop_unnamed(self, urls: list[str], now: float) -> list[str]:
        named = {host_port(u) for u in urls}
        dropped = []
        for name, b in list(self._backends.items()):
            if b.addr in named:
                b.named_at = now
            elif now - b.named_at > BACKEND_GRACE_S:
                del self._backends[name]
                dropped.append(self._drop(name, "no router names it any more"))
        if dropped:
            self._backends_seen = None
        self._retarget_gpus(dropped)
        return dropped

    def due(self, name: str) -> bool:
        """False while a backend that is down waits for its next scrape (back-off)."""
        b = self._backends.get(name)
        return b is None or b.next_at is None or self.now() >= b.next_at

    def answered(self, raw: RawScrape) -> None:
        """Note a backend's metrics answer: ``down`` backs off, anything else resets."""
        b = self._backends.get(raw.target)
        if b is None:
            return
        if raw.status == "down":
            b.downs += 1
            b.next_at = self.now() + next_scrape_in(b.downs, float(self.config.interval_s))
        else:
            b.downs, b.next_at = 0, None


def unclash(have: list[Target], found: list[Target]) -> list[Target]:
    """A new pod at the address a moved one had (whose row kept that name): a name of its
    own (``…#2``), so it is a new row, not the old one's."""
    names = {t.name for t in have}
    urls = {t.base_url.rstrip("/") for t in have}
    out = []
    for t in found:
        if t.container is not None and t.name in names and t.base_url.rstrip("/") not in urls:
            n = 2
            while f"{t.name}#{n}" in names:
                n += 1
            t = dataclasses.replace(t, name=f"{t.name}#{n}")
        out.append(t)
    return out
