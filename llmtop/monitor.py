"""The monitor loop: one tick = scrape every target in parallel + one GPU sample.

``Monitor.tick`` starts one scrape per target that has none in flight (a target whose
previous scrape is still running is skipped this tick; it turns ``stale`` if that lasts),
samples the GPUs in a thread at the same time (no thread or task when the sampler's
``held_sample()`` answers at once: no GPU to ask), waits up to ``tick_timeout_s``, and hands
every finished ``RawScrape``/``GpuSample`` to the sink (the recorder) and the store, in
target order, with the side polls that came back: llama-server's ``/slots`` and the health
endpoint of each row that may be stuck in the previous commit (``diagnose.rules.stuck.
wants_health``: one poll per target in flight, none for a busy engine). Then ``store.commit``
and the 10 s snapshot. An exception anywhere becomes an
event-log line and the loop carries on. No UI, no printing.

Identity never delays the first data: the monitor's ``Scraper`` asks for it beside the first
scrape and attaches it to the next one (``Scraper(defer_identity=True)``). Nor does start-up:
``prefetch`` starts the first tick's scrapes and GPU sample in a thread while the caller
imports the UI; the first tick takes what they found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.diagnose.live import attach as attach_diagnosis
from llmtop.discovery import Rediscovery, backend_targets, moved_targets, new_targets
from llmtop.history.store import SERIES_WINDOW_S, Store
from llmtop.model import GpuSample, RawScrape, Snapshot

__all__ = ["THREAD_PARSE_BYTES", "Monitor"]

THREAD_PARSE_BYTES = 1 << 20
"""Bodies larger than this are parsed in a worker thread, off the event loop."""
_WORKERS = "/workers "
"""Key prefix of a router's ``/workers`` poll among the side polls (``_slots``)."""
WORKERS_EVERY_S = 10.0
"""A router's worker list (roles) changes with its pool, not every refresh: asked this often
(the store keeps the last answer between polls)."""

Sink = Callable[[Any], Any]


class Monitor:
    """Scrapes, samples and feeds the store; see the module docstring."""

    def __init__(
        self,
        config: Config,
        *,
        scraper: Any = None,
        gpu_sampler: Any = None,
        sink: Sink | None = None,
        store: Store | None = None,
        tick_timeout_s: float | None = None,
        rediscover: Rediscovery | None = None,
    ) -> None:
        self.config = config
        self.store = store if store is not None else Store(config)
        attach_diagnosis(self.store)  # findings + baseline at each commit (llmtop/diagnose)
        self.sink = sink
        self.targets: list[Target] = list(config.targets)
        self.tick_timeout_s = tick_timeout_s if tick_timeout_s is not None else max(
            0.2, float(config.interval_s))
        """How long one tick waits for scrapes; slower ones stay in flight."""
        self._scraper = scraper
        self._own_scraper = scraper is None
        self._gpu = gpu_sampler
        self._pending: dict[str, asyncio.Task[RawScrape]] = {}
        self._workers_at: dict[str, float] = {}
        """When each router's ``/workers`` was last asked (``WORKERS_EVERY_S``)."""
        self._backends_seen: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        """The routers' backend URLs and the targets ``_add_backends`` last looked at."""
        self._slots: dict[str, asyncio.Future[RawScrape]] = {}
        """llama-server ``/slots`` polls in flight (its in-flight requests)."""
        self._health: dict[str, asyncio.Future[RawScrape]] = {}
        """Health endpoint polls in flight, of targets whose row may be stuck."""
        self._last: Snapshot | None = None
        """The latest committed snapshot: whose rows ``_poll_health`` asks about."""
        self._gpu_task: asyncio.Future[GpuSample] | None = None
        self.ticks = 0
        self._lock = asyncio.Lock()
        self._first: concurrent.futures.Future[tuple[dict[str, RawScrape], Any]] | None = None
        """``prefetch``'s results, taken by the first tick."""
        self._first_running: concurrent.futures.Future[Any] | None = None
        self.rediscovery = rediscover
        """Where no target was given (``from_config(..., rediscover=True)``): the search
        for engines, again every 10 s (``llmtop.rediscover``); None where targets were named."""
        self._found_first: list[Target] = []
        """What ``prefetch``'s search found, added by the next tick."""
        self._said: set[str] = set()
        """Discovery's notes already in the event log (each is said once)."""
        self.spans: Any = None
        """An ``sources.otlp.OtlpReceiver`` (``--otlp-listen``): each tick takes its queued
        span bodies to the sink and the store's request window; ``aclose`` closes it."""

    @classmethod
    def from_config(cls, config: Config, demo: Any = None, *, sink: Sink | None = None,
                    store: Store | None = None, rediscover: bool = False) -> Monitor:
        """A monitor with the real ``Scraper`` and GPU sampler (the demo's when running);
        ``rediscover``: search this machine for engines now and every 10 s (no TARGET)."""
        from llmtop.gpu import make_sampler
        from llmtop.sources.scrape import Scraper

        gpu_url = getattr(demo, "gpu_url", None) if demo is not None else None
        return cls(config, scraper=Scraper(config, defer_identity=True),
                   gpu_sampler=make_sampler(config, demo_gpu_url=gpu_url), sink=sink,
                   store=store, rediscover=Rediscovery(config) if rediscover else None)

    @property
    def scraper(self) -> Any:
        if self._scraper is None:
            from llmtop.sources.scrape import Scraper

            self._scraper = Scraper(self.config, defer_identity=True)
        return self._scraper

    def set_targets(self, targets: list[Target]) -> None:
        """Replace the target list (e.g. after rediscovery); in-flight scrapes finish."""
        self.targets = list(targets)

    # ------------------------------------------------------------------ start-up
    def prefetch(self) -> None:
        """Start the first tick's scrapes (and a blocking GPU sampler's first sample, NVML's
        start-up included) now, in a thread with its own event loop and its own ``Scraper``:
        they wait on the network and the driver while the caller imports and lays out the
        UI. The first ``tick`` takes what they found (a target not answered by then is
        scraped as usual). Identity comes with a later scrape, as it would anyway."""
        searching = self.rediscovery is not None and not self.rediscovery.searched
        if self._first is not None or self.ticks or not (self.targets or searching):
            return
        fut: concurrent.futures.Future[tuple[dict[str, RawScrape], Any]] = (
            concurrent.futures.Future())
        targets, gpu = list(self.targets), self._gpu
        find = self.rediscovery if searching else None

        async def fetch() -> tuple[dict[str, RawScrape], Any]:
            if find is not None:  # the search first, then the engines it found
                self._found_first = await find.first()
                targets.extend(self._found_first)
            return await _first_fetch(self.config, targets, gpu, self.tick_timeout_s)

        def run() -> None:
            try:
                fut.set_result(asyncio.run(fetch()))
            except BaseException as exc:  # the first tick scrapes as usual
                fut.set_exception(exc)

        threading.Thread(target=run, name="llmtop-first-scrape", daemon=True).start()
        self._first = fut

    async def _take_first(self, limit: float) -> tuple[dict[str, RawScrape], Any]:
        fut, self._first = self._first, None
        if fut is None:
            return {}, None
        self._first_running = fut  # its GPU sample may still run: no second one beside it
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(fut)), limit)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self._error(None, "first scrape", exc)
            return {}, None

    # ------------------------------------------------------------------ one tick

    async def tick(self, *, timeout_s: float | None = None) -> Snapshot:
        """Scrape all targets in parallel (at most one scrape each), sample GPUs, feed the
        sink and the store, commit, and return the 10 s snapshot. Concurrent calls (a
        "refresh now" during a tick) run one after the other."""
        async with self._lock:
            return await self._tick(timeout_s)

    async def _tick(self, timeout_s: float | None) -> Snapshot:
        self.ticks += 1
        limit = self.tick_timeout_s if timeout_s is None else timeout_s
        gpu_now: GpuSample | None = None
        raws: dict[str, RawScrape] = {}
        if self._first is not None:  # prefetch's answers stand for this tick's own
            raws, gpu_now = await self._take_first(limit)
        if self.rediscovery is not None:
            r = self.rediscovery
            found, self._found_first = self._found_first, []  # prefetch's search
            if not (found or r.searched):
                found = await r.first()
            self._add_found([*found, *r.poll()])
        self._add_backends()
        if raws:
            loop = asyncio.get_running_loop()
            for t in self.targets:
                raw = raws.get(t.name)
                if raw is not None and t.name not in self._pending:
                    done: asyncio.Future[RawScrape] = loop.create_future()
                    done.set_result(raw)
                    self._pending[t.name] = done  # type: ignore[assignment]
        for t in self.targets:
            if t.name not in self._pending:
                self._pending[t.name] = asyncio.ensure_future(self._scrape_one(t))
        if self._first_running is not None and self._first_running.done():
            self._first_running = None
        if (gpu_now is None and self._gpu is not None and self._gpu_task is None
                and self._first_running is None):
            held = getattr(self._gpu, "held_sample", None)
            try:
                gpu_now = held() if held is not None else None  # no GPU to ask: no task
            except Exception as exc:
                self._error(None, "GPU sampling", exc)
            if gpu_now is None:
                run = getattr(self._gpu, "sample_async", None)
                self._gpu_task = asyncio.ensure_future(
                    run() if run is not None else asyncio.to_thread(self._gpu.sample))
        self._poll_slots()
        self._poll_workers()
        self._poll_health()
        waiting: list[asyncio.Future[Any]] = [*self._pending.values(), *self._slots.values(),
                                              *self._health.values()]
        if self._gpu_task is not None:
            waiting.append(self._gpu_task)
        if waiting:
            await asyncio.wait(waiting, timeout=limit)
        t_mono, t_wall = None, None
        for name in [t.name for t in self.targets] + [n for n in self._pending
                                                       if n not in {t.name for t in
                                                                    self.targets}]:
            task = self._pending.get(name)
            if task is None or not task.done():
                continue
            del self._pending[name]
            raw = self._result(task, name)
            if raw is not None:
                await self._feed(raw, self.store.ingest)
                t_mono, t_wall = _later(t_mono, t_wall, raw.t_mono, raw.t_wall)
        await self._collect(self._slots, "/slots poll")
        for raw in await self._collect(self._health, "health check"):  # this tick's rows
            t_mono, t_wall = _later(t_mono, t_wall, raw.t_mono, raw.t_wall)  # carry it
        sample = gpu_now
        if self._gpu_task is not None and self._gpu_task.done():
            task, self._gpu_task = self._gpu_task, None
            sample = self._result(task, None, what="GPU sampling")
        if sample is not None:
            await self._feed(sample, self.store.ingest_gpus)
            t_mono, t_wall = _later(t_mono, t_wall, sample.t_mono, sample.t_wall)
        if self.spans is not None:
            for body in self.spans.drain():
                await self._feed(body, self.store.ingest_spans)
            self.store.requests.receiver = self.spans.stats()
        if t_mono is None or t_wall is None:
            t_mono, t_wall = clock.monotonic(), clock.time()
        try:
            self._last = self.store.commit(t_mono, t_wall)
            return self._last
        except Exception as exc:
            self._error(None, "store commit", exc)
            try:
                return self.store.snapshot(SERIES_WINDOW_S, t_mono, t_wall)
            except Exception:
                return Snapshot(time=t_wall, window_s=SERIES_WINDOW_S)

    def _poll_slots(self) -> None:
        """Start a ``/slots`` poll of each llama-server target that has none in flight."""
        slots = getattr(self.scraper, "slots", None)
        if slots is None:
            return
        for t in self.targets:
            if t.name not in self._slots and self.store.engine_of(t.name) == "llamacpp":
                self._slots[t.name] = asyncio.ensure_future(slots(t))

    def _poll_health(self) -> None:
        """Start a health poll of each target a row of which may be stuck
        (``diagnose.rules.stuck.wants_health``, in the latest committed snapshot) and that
        has a health path (``Scraper.health_url``) and no poll in flight: at most one per
        target per tick; a busy engine making tokens is never asked."""
        url_of = getattr(self.scraper, "health_url", None)
        if url_of is None or self._last is None:
            return
        from llmtop.diagnose.rules.stuck import wants_health

        names = {r.target for r in self._last.engines if wants_health(r)}
        for t in self.targets:
            if t.name in names and t.name not in self._health:
                url = url_of(t, self.store.engine_of(t.name))
                if url is not None:
                    self._health[t.name] = asyncio.ensure_future(self.scraper.health(t, url))

    async def check_health(self, timeout_s: float) -> None:
        """Ask the health endpoints of the rows that may be stuck now (``--once``, after its
        last tick) and feed the answers (sink and store); waits up to ``timeout_s``."""
        async with self._lock:
            self._poll_health()
            if self._health:
                await asyncio.wait(list(self._health.values()), timeout=timeout_s)
            await self._collect(self._health, "health check")

    async def _collect(self, polls: dict[str, asyncio.Future[RawScrape]], what: str
                       ) -> list[RawScrape]:
        """Feed the side polls (``/slots``, health) that are done (returned); the rest stay
        in flight."""
        fed = []
        for name, task in list(polls.items()):
            if task.done():
                del polls[name]
                side = name.startswith(_WORKERS)
                raw = self._result(task, name.removeprefix(_WORKERS),
                                   what="/workers poll" if side else what)
                if raw is not None:
                    await self._feed(raw, self.store.ingest)
                    fed.append(raw)
        return fed

    def _poll_workers(self) -> None:
        """Start a ``/workers`` poll (roles per backend) of each sglang-router target whose
        serving URL is known (``Target.api_url``), one in flight each; kept in ``_slots``
        under ``_WORKERS + name`` so the same drain feeds it to the store."""
        workers = getattr(self.scraper, "workers", None)
        if workers is None:
            return
        now = time.monotonic()
        for t in self.targets:
            key = _WORKERS + t.name
            if (t.api_url and key not in self._slots
                    and now - self._workers_at.get(t.name, -WORKERS_EVERY_S) >= WORKERS_EVERY_S
                    and self.store.engine_of(t.name) == "sglang-router"):
                self._workers_at[t.name] = now
                self._slots[key] = asyncio.ensure_future(workers(t))

    async def _scrape_one(self, target: Target) -> RawScrape:
        raw = await self.scraper.scrape(target)
        pending = getattr(self.scraper, "identity_pending", None)
        if (
            raw.status == "ok"
            and raw.identity is None
            and self.store.needs_identity(target.name)
            and not (pending is not None and pending(target.name))  # comes with the next one
        ):
            try:
                ident = await self.scraper.identify(target)
            except Exception as exc:
                self._error(target.name, "identify", exc)
            else:
                raw = dataclasses.replace(raw, identity=ident or {"host": target.host})
        return raw

    def _result(self, task: asyncio.Future[Any], target: str | None, what: str = "scrape"
                ) -> Any:
        if task.cancelled():
            return None
        exc = task.exception()
        if exc is not None:
            self._error(target, what, exc)
            return None
        return task.result()

    async def _feed(self, item: Any, ingest: Callable[[Any], None]) -> None:
        target = item.target if isinstance(item, RawScrape) else None
        if self.sink is not None:
            try:
                res = self.sink(item)
                if inspect.isawaitable(res):
                    await res
            except Exception as exc:
                self._error(target, "recorder", exc)
        try:
            if (isinstance(item, RawScrape) and item.body is not None
                    and len(item.body) > THREAD_PARSE_BYTES
                    and ingest == self.store.ingest):
                # a large body would stall the event loop (the UI's) for seconds: parse it
                # in a worker thread; the store is only changed here, on the loop
                parsed = await asyncio.to_thread(self.store.parse_raw, item)
                self.store.ingest(item, parsed)
            else:
                ingest(item)
        except Exception as exc:
            self._error(target, "store", exc)

    def _error(self, target: str | None, what: str, exc: BaseException) -> None:
        try:
            self.store.event("error", target, f"{what} failed: {type(exc).__name__}: {exc}")
        except Exception:  # the event log itself must never take the loop down
            pass

    # ------------------------------------------------------------------ shutdown

    def _add_found(self, found: list[Target]) -> None:
        """Add the engines a search found that are not watched yet, each named in the log;
        a watched engine in a pod or container now at a new address keeps its row (it is
        scraped there); what the search could not read is said once."""
        for note in self.rediscovery.notes if self.rediscovery is not None else ():
            if note not in self._said:
                self._said.add(note)
                self.store.event("warn", None, note)
        if not found:
            return
        for old, new in moved_targets(self.targets, found):
            moved = dataclasses.replace(new, name=old.name)
            self.targets[self.targets.index(old)] = moved
            self.store.learn(moved)
            reid = getattr(self.scraper, "reidentify", None)
            if reid is not None:
                reid(old.name)
            assert moved.container is not None
            self.store.event("info", old.name, f"{moved.container.label} is back at "
                             f"{moved.base_url} (restarted with a new address)")
        for t in new_targets(self.targets, _unclash(self.targets, found)):
            self.targets.append(t)
            self.store.learn(t)
            where = f" ({t.container.label})" if t.container is not None else ""
            self.store.event("info", t.name, f"found on this machine{where} (autodiscovery)")
        set_targets = getattr(self._gpu, "set_targets", None)
        if set_targets is not None:  # GPU memory is attributed to the engines found too
            set_targets(self.targets)

    def _add_backends(self) -> None:
        """Add the backends routers named that are not watched yet (``rediscover``)."""
        try:
            urls = self.store.backend_urls()
        except Exception as exc:  # never take the tick down
            self._error(None, "router backends", exc)
            return
        if not urls:
            return
        key = (tuple(urls), tuple(t.base_url for t in self.targets))
        if key == self._backends_seen:  # the same routers' backends and targets: none new
            return
        self._backends_seen = key
        for t in backend_targets(urls, self.targets, timeout_s=self.config.timeout_s,
                                 verify_tls=self.config.verify_tls):
            self.targets.append(t)
            self.store.event("info", t.name, "found behind a router (its worker URL)")

    async def aclose(self) -> None:
        """Cancel scrapes in flight, close the scraper (if ours or real) and the sampler."""
        if self.spans is not None:
            try:
                await asyncio.to_thread(self.spans.close)
            except Exception as exc:
                self._error(None, "closing the OTLP receiver", exc)
        if self.rediscovery is not None:
            await self.rediscovery.aclose()
        pending = [*self._pending.values(), *self._slots.values(), *self._health.values()]
        self._pending.clear()
        self._slots.clear()
        self._health.clear()
        if self._gpu_task is not None:
            pending.append(self._gpu_task)
            self._gpu_task = None
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self._scraper is not None and hasattr(self._scraper, "aclose"):
            try:
                await self._scraper.aclose()
            except Exception as exc:
                self._error(None, "closing the scraper", exc)
        if self._gpu is not None:
            try:
                aclose = getattr(self._gpu, "aclose", None)
                if aclose is not None:
                    await aclose()
                else:
                    self._gpu.close()
            except Exception as exc:
                self._error(None, "closing the GPU sampler", exc)


def _unclash(have: list[Target], found: list[Target]) -> list[Target]:
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


async def _first_fetch(config: Config, targets: list[Target], gpu: Any, limit: float
                       ) -> tuple[dict[str, RawScrape], Any]:
    """``Monitor.prefetch``'s thread: one scrape of each target (at most ``limit`` seconds)
    and, for a sampler that blocks (NVML), its first sample beside them."""
    from llmtop.sources.scrape import Scraper

    scraper = Scraper(config, defer_identity=True)
    gpu_task = None
    if gpu is not None and getattr(gpu, "sample_async", None) is None:
        held = getattr(gpu, "held_sample", None)
        if held is None or held() is None:
            gpu_task = asyncio.ensure_future(asyncio.to_thread(gpu.sample))
    tasks = {t.name: asyncio.ensure_future(scraper.scrape(t)) for t in targets}
    try:
        waiting = [*tasks.values(), *([gpu_task] if gpu_task is not None else [])]
        await asyncio.wait(waiting, timeout=limit)
        raws = {n: t.result() for n, t in tasks.items()
                if t.done() and not t.cancelled() and t.exception() is None}
        sample = None
        if gpu_task is not None and gpu_task.done() and not gpu_task.cancelled():
            sample = gpu_task.result() if gpu_task.exception() is None else None
        return raws, sample
    finally:
        for t in tasks.values():
            t.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        await scraper.aclose()


def _later(t_mono: float | None, t_wall: float | None, m: float, w: float
           ) -> tuple[float, float]:
    if t_mono is None or t_wall is None or m >= t_mono:
        return m, w
    return t_mono, t_wall
