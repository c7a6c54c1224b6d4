"""The monitor and its tick: scrape every target in parallel, one GPU sample, side polls.

``Monitor.tick`` starts one scrape per target that has none in flight (a target whose
previous scrape is still running is skipped this tick; it turns ``stale`` if that lasts, and
a router backend that is down waits its back-off, ``targetset``), samples the GPUs at the
same time (no task when the sampler's ``held_sample()`` answers at once: no GPU to ask),
starts the side polls that are due (``sidepolls``), waits up to ``tick_timeout_s``, and
feeds every finished ``RawScrape``/``GpuSample`` to the sink (the recorder) and the store, in
target order, then the side polls that came back and the span bodies received. Then
``store.commit`` and the 10 s snapshot. An exception anywhere becomes an event-log line and
the loop carries on. No UI, no printing.

Logs (``logs=``, a ``LogFollower``): each target's log is found off the loop
(``discovery.logs.find_logs`` in a thread, its answer taken by a later tick) and followed;
each tick drains what was read and feeds every ``RawLog`` to the sink and
``Store.add_log``. A log found before its engine was known is followed again once the
store knows the engine (its line format).

Identity never delays the first data: the monitor's ``Scraper`` asks for it beside the first
scrape and attaches it to the next one (``Scraper(defer_identity=True)``). Nor does start-up:
``prefetch`` starts the first tick's scrapes and GPU sample in a thread while the caller
imports the UI; the first tick takes what they found.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import threading
from collections.abc import Iterable
from typing import Any

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.diagnose.live import attach as attach_diagnosis
from llmtop.discovery import Rediscovery
from llmtop.history.store import SERIES_WINDOW_S, Store
from llmtop.model import GpuSample, LogLocation, RawScrape, Snapshot
from llmtop.monitor.feed import Feeder, Sink
from llmtop.monitor.ports import GpuSampler, LogFollower, Scraper, SpanReceiver
from llmtop.monitor.prefetch import Prefetch
from llmtop.monitor.sidepolls import HEALTH, PollContext, PollKind, SidePolls
from llmtop.monitor.targetset import TargetSet

__all__ = ["Monitor"]


class Monitor:
    """Scrapes, samples and feeds the store; see the module docstring."""

    def __init__(
        self,
        config: Config,
        *,
        scraper: Scraper | None = None,
        gpu_sampler: GpuSampler | None = None,
        sink: Sink | None = None,
        store: Store | None = None,
        tick_timeout_s: float | None = None,
        rediscover: Rediscovery | None = None,
        receiver: SpanReceiver | None = None,
        logs: LogFollower | None = None,
        log_roots: Any = None,
    ) -> None:
        self.config = config
        self.store = store if store is not None else Store(config)
        attach_diagnosis(self.store)  # findings + baseline at each commit (llmtop/diagnose)
        self.feeder = Feeder(self.store, sink)
        self.tick_timeout_s = tick_timeout_s if tick_timeout_s is not None else max(
            0.2, float(config.interval_s))
        """How long one tick waits for scrapes; slower ones stay in flight."""
        if scraper is None:
            from llmtop.sources.scrape import Scraper as HttpScraper

            scraper = HttpScraper(config, defer_identity=True)
        self.scraper: Scraper = scraper
        self._gpu = gpu_sampler
        self.logs = logs
        """The log follower: each tick drains it; ``aclose`` closes it."""
        self._log_roots = log_roots
        """Where logs are looked for (``discovery.logs.LogRoots``; None: this machine's)."""
        self._log_task: asyncio.Future[list[tuple[Target, LogLocation | None]]] | None = None
        self._untyped: dict[str, LogLocation] = {}
        """Logs followed before their engine (so their line format) was known."""
        self._first_logs: concurrent.futures.Future[Any] | None = None
        """The given targets' logs, found from the start in a thread of their own (while
        a face imports its UI); the first tick waits for it beside its scrapes, so the
        second tick (``--once``) already has lines."""
        self.target_set = TargetSet(config, self.store, scraper, gpu_sampler, logs=logs)
        if logs is not None:
            self._first_logs = self._find_in_thread(self.target_set.logs_wanted())
        self._pending: dict[str, asyncio.Future[RawScrape]] = {}
        self._polls = SidePolls()
        self._last: Snapshot | None = None
        """The latest committed snapshot: whose rows the health polls ask about."""
        self._gpu_task: asyncio.Future[GpuSample] | None = None
        self.ticks = 0
        self._lock = asyncio.Lock()
        self._prefetch = Prefetch()
        self.rediscovery = rediscover
        """Where no target was given (``from_config(..., rediscover=True)``): the search
        for engines, again every 10 s (``llmtop.discovery``); None where targets were named."""
        self._found_first: list[Target] = []
        """What ``prefetch``'s search found, added by the next tick."""
        self._searches = 0
        """``rediscovery.searches`` as last seen: a change is a whole new search's answer."""
        self.receiver = receiver
        """The span receiver (``--otlp-listen``): each tick takes its queued span bodies to
        the sink and the store's request window; ``aclose`` closes it."""

    @classmethod
    def from_config(cls, config: Config, demo: Any = None, *, sink: Sink | None = None,
                    store: Store | None = None, rediscover: bool = False,
                    receiver: SpanReceiver | None = None) -> Monitor:
        """A monitor with the real ``Scraper``, GPU sampler (the demo's when running) and
        log follower (the demo's too: its targets name their logs; none with ``--no-logs``);
        ``rediscover``: search this machine for engines now and every 10 s (no TARGET);
        ``receiver``: the span receiver, closed with the monitor."""
        from llmtop.gpu import make_sampler
        from llmtop.sources.scrape import Scraper as HttpScraper

        gpu_url = demo.gpu_url if demo is not None else None
        logs = None
        if config.logs:  # the demo's targets name the logs its engines write (Target.log)
            from llmtop.parse.logs import assembler
            from llmtop.sources.logs import Follower

            logs = Follower(assembler, lines=config.log_lines)
        return cls(config, scraper=HttpScraper(config, defer_identity=True),
                   gpu_sampler=make_sampler(config, demo_gpu_url=gpu_url), sink=sink,
                   store=store, rediscover=Rediscovery(config) if rediscover else None,
                   receiver=receiver, logs=logs)

    @property
    def targets(self) -> list[Target]:
        """The targets scraped now (given, found, and router backends)."""
        return self.target_set.targets

    @property
    def sink(self) -> Sink | None:
        """Receives every raw input before the store (the recorder, the exporter)."""
        return self.feeder.sink

    @sink.setter
    def sink(self, sink: Sink | None) -> None:
        self.feeder.sink = sink

    # ------------------------------------------------------------------ start-up
    def prefetch(self) -> None:
        """Start the first tick's scrapes (and the GPU sampler's first sample, NVML's
        start-up included) now, in a thread with its own event loop and its own ``Scraper``
        (``monitor.prefetch``); the first ``tick`` takes what they found."""
        searching = self.rediscovery is not None and not self.rediscovery.searched
        if self._prefetch.pending or self.ticks or not (self.targets or searching):
            return
        find = self.rediscovery if searching else None

        async def search() -> list[Target]:
            assert find is not None
            self._found_first = await find.first()
            return self._found_first

        self._prefetch.start(self.config, list(self.targets), self._gpu, self.tick_timeout_s,
                             search if find is not None else None)

    async def _take_first(self, limit: float) -> tuple[dict[str, RawScrape], Any]:
        try:
            return await self._prefetch.take(limit)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.feeder.error(None, "first scrape", exc)
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
        if self._prefetch.pending:  # prefetch's answers stand for this tick's own
            raws, gpu_now = await self._take_first(limit)
        if self.rediscovery is not None:
            r = self.rediscovery
            found, self._found_first = self._found_first, []  # prefetch's search
            if not (found or r.searched):
                found = await r.first()
            found = [*found, *r.poll()]
            searched, self._searches = r.searches != self._searches, r.searches
            self._cancel(self.target_set.add_found(found, list(r.notes), searched=searched))
        self._follow_backends()
        self._follow_logs()
        self._start_scrapes(raws)
        if (gpu_now is None and self._gpu is not None and self._gpu_task is None
                and not self._prefetch.gpu_busy()):
            try:
                gpu_now = self._gpu.held_sample()  # no GPU to ask: no task
            except Exception as exc:
                self.feeder.error(None, "GPU sampling", exc)
            if gpu_now is None:
                self._gpu_task = asyncio.ensure_future(self._gpu.sample_async())
        self._polls.start(self.scraper, self.targets, self._poll_context())
        waiting: list[asyncio.Future[Any]] = [*self._pending.values(), *self._polls.waiting()]
        if self._gpu_task is not None:
            waiting.append(self._gpu_task)
        if self.ticks == 1 and self._log_task is not None:
            waiting.append(self._log_task)  # the first logs: read by the second tick
        if waiting:
            await asyncio.wait(waiting, timeout=limit)
        if self.ticks == 1:
            self._follow_logs()
        t_mono, t_wall = await self._feed_scrapes()
        for raw in await self._feed_polls():  # a health answer stands for this tick's rows
            t_mono, t_wall = _later(t_mono, t_wall, raw.t_mono, raw.t_wall)
        sample = gpu_now
        if self._gpu_task is not None and self._gpu_task.done():
            task, self._gpu_task = self._gpu_task, None
            sample = self.feeder.result(task, None, what="GPU sampling")
        if sample is not None:
            await self.feeder.feed(sample, self.store.ingest_gpus)
            t_mono, t_wall = _later(t_mono, t_wall, sample.t_mono, sample.t_wall)
        if self.receiver is not None:
            for body in self.receiver.drain():
                await self.feeder.feed(body, self.store.ingest_spans)
            self.store.requests.receiver = self.receiver.stats()
        await self._feed_logs()
        if t_mono is None or t_wall is None:
            t_mono, t_wall = clock.monotonic(), clock.time()
        try:
            self._last = self.store.commit(t_mono, t_wall)
            return self._last
        except Exception as exc:
            self.feeder.error(None, "store commit", exc)
            try:
                return self.store.snapshot(SERIES_WINDOW_S, t_mono, t_wall)
            except Exception:
                return Snapshot(time=t_wall, window_s=SERIES_WINDOW_S)

    def _follow_backends(self) -> None:
        """Router backends added and dropped (``targetset``); a dropped one's scrape and
        side polls in flight are cancelled."""
        try:
            dropped = self.target_set.add_backends()
        except Exception as exc:  # never take the tick down
            self.feeder.error(None, "router backends", exc)
            return
        self._cancel(dropped)

    def _follow_logs(self) -> None:
        """Follow the logs found since the last tick; start finding the ones now wanted
        (in a thread: it may scan ``/proc``)."""
        if self.logs is None:
            return
        try:
            self._take_found_logs()
            self._retype_logs()
        except Exception as exc:  # never take the tick down
            self.feeder.error(None, "following logs", exc)
        if self._log_task is not None:
            return
        if self._first_logs is not None:
            self._log_task = asyncio.wrap_future(self._first_logs)
            self._first_logs = None
            return
        wanted = self.target_set.logs_wanted()
        if wanted:
            self._log_task = asyncio.wrap_future(self._find_in_thread(wanted))

    def _find_in_thread(self, wanted: list[Target]) -> concurrent.futures.Future[Any] | None:
        """``discovery.logs.find_logs`` on a thread of its own (it may scan ``/proc``)."""
        if not wanted:
            return None
        from llmtop.discovery.logs import DEFAULT_ROOTS, find_logs

        roots = self._log_roots if self._log_roots is not None else DEFAULT_ROOTS
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(find_logs(wanted, self.config.log_paths, roots))
            except BaseException as exc:  # said by the tick that takes it
                done.set_exception(exc)

        threading.Thread(target=run, name="llmtop-find-logs", daemon=True).start()
        return done

    def _take_found_logs(self) -> None:
        task = self._log_task
        if task is None or not task.done():
            return
        self._log_task = None
        assert self.logs is not None
        from llmtop.discovery.logs import note

        for t, where in self.feeder.result(task, None, what="finding logs") or []:
            if where is None or not self.target_set.watched(t.name):
                continue
            if where.fmt is None and where.error is None:
                where = self._typed(t.name, where)
            self.logs.follow(t.name, where)
            if where.error is not None:
                self.target_set.say(note(t.name, where))

    def _typed(self, name: str, where: LogLocation) -> LogLocation:
        """``where`` with its engine's line format once the store knows the engine; until
        then it is remembered, to be followed again then."""
        engine = self.store.engine_of(name)
        if engine is None:
            self._untyped[name] = where
            return where
        self._untyped.pop(name, None)
        return dataclasses.replace(where, fmt=engine)

    def _retype_logs(self) -> None:
        assert self.logs is not None
        for name, where in list(self._untyped.items()):
            if not self.target_set.watched(name):
                del self._untyped[name]
                continue
            typed = self._typed(name, where)
            if typed.fmt is not None:
                self.logs.follow(name, typed)

    async def _feed_logs(self) -> None:
        """What the follower read since the last tick: each ``RawLog`` to the sink and the
        store."""
        if self.logs is None:
            return
        try:
            raws = self.logs.drain()
        except Exception as exc:
            self.feeder.error(None, "reading logs", exc)
            return
        for raw in raws:
            await self.feeder.feed(raw, self.store.add_log)

    def _cancel(self, dropped: list[str]) -> None:
        """A dropped target's scrape and side polls in flight are cancelled."""
        for name in dropped:
            task = self._pending.pop(name, None)
            if task is not None:
                task.cancel()
            self._polls.forget(name)

    def _start_scrapes(self, first: dict[str, RawScrape]) -> None:
        """One scrape per target that has none in flight and is due; prefetch's answers
        (``first``) stand for the first tick's own."""
        loop = asyncio.get_running_loop()
        for t in self.targets:
            raw = first.get(t.name)
            if raw is not None and t.name not in self._pending:
                done: asyncio.Future[RawScrape] = loop.create_future()
                done.set_result(raw)
                self._pending[t.name] = done
        for t in self.targets:
            if t.name not in self._pending and self.target_set.due(t.name):
                self._pending[t.name] = asyncio.ensure_future(self._scrape_one(t))

    async def _feed_scrapes(self) -> tuple[float | None, float | None]:
        """Feed the finished scrapes in target order (then any of a target gone); returns
        the latest time among them."""
        t_mono: float | None = None
        t_wall: float | None = None
        names = [t.name for t in self.targets]
        watched = set(names)
        gone = [n for n in self._pending if n not in watched]
        for name in names + gone:
            task = self._pending.get(name)
            if task is None or not task.done():
                continue
            del self._pending[name]
            raw = self.feeder.result(task, name)
            if raw is not None:
                self.target_set.answered(raw)
                await self.feeder.feed(raw, self.store.ingest)
                t_mono, t_wall = _later(t_mono, t_wall, raw.t_mono, raw.t_wall)
        return t_mono, t_wall

    def _poll_context(self) -> PollContext:
        stuck: frozenset[str] = frozenset()
        if self._last is not None:
            from llmtop.diagnose.rules.stuck import wants_health

            stuck = frozenset(r.target for r in self._last.engines if wants_health(r))
        return PollContext(engine_of=self.store.engine_of, stuck=stuck)

    async def _feed_polls(self, kinds: Iterable[PollKind] | None = None) -> list[RawScrape]:
        """Feed the side polls that are done (the rest stay in flight); returns the answers
        that stand for this tick's rows (``PollKind.now_of_rows``)."""
        now_of_rows = []
        for kind, name, task in self._polls.done(kinds):
            raw = self.feeder.result(task, name, what=kind.what)
            if raw is not None:
                await self.feeder.feed(raw, self.store.ingest)
                if kind.now_of_rows:
                    now_of_rows.append(raw)
        return now_of_rows

    async def check_health(self, timeout_s: float) -> None:
        """Ask the health endpoints of the rows that may be stuck now (``--once``, after its
        last tick) and feed the answers (sink and store); waits up to ``timeout_s``."""
        async with self._lock:
            self._polls.start(self.scraper, self.targets, self._poll_context(), (HEALTH,))
            waiting = self._polls.waiting((HEALTH,))
            if waiting:
                await asyncio.wait(waiting, timeout=timeout_s)
            await self._feed_polls((HEALTH,))

    async def _scrape_one(self, target: Target) -> RawScrape:
        raw = await self.scraper.scrape(target)
        if (
            raw.status == "ok"
            and raw.identity is None
            and self.store.needs_identity(target.name)
            and not self.scraper.identity_pending(target.name)  # comes with the next one
        ):
            try:
                ident = await self.scraper.identify(target)
            except Exception as exc:
                self.feeder.error(target.name, "identify", exc)
            else:
                raw = dataclasses.replace(raw, identity=ident or {"host": target.host})
        return raw

    # ------------------------------------------------------------------ shutdown
    async def aclose(self) -> None:
        """Cancel scrapes in flight; close the receiver, the scraper and the sampler."""
        if self.receiver is not None:
            try:
                await asyncio.to_thread(self.receiver.close)
            except Exception as exc:
                self.feeder.error(None, "closing the OTLP receiver", exc)
        if self.rediscovery is not None:
            await self.rediscovery.aclose()
        if self.logs is not None:
            try:
                await asyncio.to_thread(self.logs.close)  # children ended, thread joined
            except Exception as exc:
                self.feeder.error(None, "closing the log follower", exc)
        pending: list[asyncio.Future[Any]] = [*self._pending.values(), *self._polls.cancel()]
        if self._log_task is not None:
            pending.append(self._log_task)
            self._log_task = None
        self._pending.clear()
        if self._gpu_task is not None:
            pending.append(self._gpu_task)
            self._gpu_task = None
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        try:
            await self.scraper.aclose()
        except Exception as exc:
            self.feeder.error(None, "closing the scraper", exc)
        if self._gpu is not None:
            try:
                await self._gpu.aclose()
            except Exception as exc:
                self.feeder.error(None, "closing the GPU sampler", exc)


def _later(t_mono: float | None, t_wall: float | None, m: float, w: float
           ) -> tuple[float, float]:
    if t_mono is None or t_wall is None or m >= t_mono:
        return m, w
    return t_mono, t_wall
