"""Autodiscovery that keeps looking: engines started after llmtop join the running monitor.

When no target is given, ``Monitor`` searches this machine (``llmtop.discover``) before its
first tick and again every ``REDISCOVER_S`` (10) seconds in the background (never delaying a
tick). A newly found engine is added and named in the event log. A found engine that later
stops answering is kept and shows as DOWN, as a named target would: it is not dropped.

A router brings its backends the same way (``backend_targets``): the worker URLs its metrics
name become targets at the next tick, unless a given or found target already has that
host:port (``localhost`` and ``127.0.0.1`` are one host).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence

from llmtop.config import Config, Target

__all__ = ["REDISCOVER_S", "Rediscovery", "backend_targets", "new_targets"]

REDISCOVER_S = 10.0
"""Seconds between searches after the first (each costs a few ms: /proc and 9 ports)."""

Find = Callable[[Config], Awaitable[list[Target]]]


async def _discover(config: Config) -> list[Target]:
    from llmtop.discover import discover

    return await discover(config)


def new_targets(have: Iterable[Target], found: Sequence[Target]) -> list[Target]:
    """The targets of ``found`` whose name and base URL are not among ``have``."""
    have = list(have)
    names = {t.name for t in have}
    urls = {t.base_url.rstrip("/") for t in have}
    out: list[Target] = []
    for t in found:
        if t.name in names or t.base_url.rstrip("/") in urls:
            continue
        names.add(t.name)
        urls.add(t.base_url.rstrip("/"))
        out.append(t)
    return out


def backend_targets(urls: Iterable[str], have: Iterable[Target], *, timeout_s: float = 2.0,
                    verify_tls: bool = True) -> list[Target]:
    """Targets for routers' backend URLs that no target of ``have`` already covers (by name,
    base URL or host:port). Only a URL with an explicit port is an engine to scrape (a Dynamo
    worker id, an EPP pod name or a LiteLLM cloud ``api_base`` is not); its path is dropped
    (a LiteLLM ``api_base`` ends in ``/v1``: the engine's metrics are at ``/metrics``)."""
    from llmtop.errors import ConfigError
    from llmtop.targets import parse_target
    from llmtop.topology.link import host_port

    have = list(have)
    addrs = {host_port(t.base_url) for t in have}
    found: list[Target] = []
    for url in urls:
        base = _with_port(url)
        if base is None:
            continue
        try:
            t = parse_target(base, timeout_s=timeout_s, verify_tls=verify_tls)
        except ConfigError:
            continue
        addr = host_port(t.base_url)
        if addr is None or addr in addrs:
            continue
        addrs.add(addr)
        found.append(t)
    return new_targets(have, found)


def _with_port(url: str) -> str | None:
    """``scheme://host:port`` of a worker URL that names its port, else None."""
    from urllib.parse import urlsplit

    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    if port is None or not parts.hostname or parts.scheme not in ("http", "https"):
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


class Rediscovery:
    """Searches for engines: once at start (awaited), then every ``every_s`` in a task."""

    def __init__(self, config: Config, *, every_s: float = REDISCOVER_S,
                 find: Find | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.every_s = every_s
        self._find = find or _discover
        self._clock = clock
        self._task: asyncio.Task[list[Target]] | None = None
        self._last: float | None = None
        """When the last search finished (None: none has)."""

    @property
    def searched(self) -> bool:
        """True once a search has finished."""
        return self._last is not None

    def mark_searched(self) -> None:
        """A search was made elsewhere (``Monitor.prefetch``'s thread): the next is due in
        ``every_s``."""
        self._last = self._clock()

    async def first(self) -> list[Target]:
        """Search now and wait for the answer (the first tick's targets)."""
        try:
            return list(await self._find(self.config))
        except Exception:  # discovery never raises by design; a bug here is no crash
            return []
        finally:
            self._last = self._clock()

    def poll(self) -> list[Target]:
        """What a finished background search found ([] when none finished), and a new
        search started when one is due."""
        found: list[Target] = []
        task = self._task
        if task is not None and task.done():
            self._task = None
            self._last = self._clock()
            if not task.cancelled() and task.exception() is None:
                found = list(task.result())
        if self._task is None and (self._last is None
                                   or self._clock() - self._last >= self.every_s):
            self._task = asyncio.ensure_future(self._find(self.config))
        return found

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
