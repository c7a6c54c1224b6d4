"""Monitor with fakes: parallel scrapes, skipped in-flight target, identity, errors -> events,
and replay of the sink's items reproducing the live snapshot."""

from __future__ import annotations

import asyncio

import pytest

from llmtop.config import Config, Target
from llmtop.history.store import Store
from llmtop.model import GpuSample
from llmtop.monitor import Monitor
from tests.history.fakes import body, fake_detect, fake_normalize, gpu_sample, raw
from tests.monitor_fakes import FakeSamplerBase, FakeScraperBase


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def step(self, dt=1.0):
        self.t += dt
        return self.t


class FakeScraper(FakeScraperBase):
    """Scripted scrapes: counters advance per call; per-target hooks for hangs and errors."""

    def __init__(self, clock):
        self.clock = clock
        self.calls: dict[str, int] = {}
        self.identify_calls: dict[str, int] = {}
        self.hang: dict[str, asyncio.Event] = {}
        self.fail: set[str] = set()
        self.gate: asyncio.Event | None = None
        self.expect = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.start: dict[str, float] = {}
        self.closed = False

    async def scrape(self, target):
        n = self.calls[target.name] = self.calls.get(target.name, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                if self.in_flight >= self.expect:
                    self.gate.set()  # everyone arrived: only possible if run in parallel
                await self.gate.wait()
            if target.name in self.hang:
                await self.hang[target.name].wait()
            if target.name in self.fail:
                raise RuntimeError("boom")
        finally:
            self.in_flight -= 1
        text = body(start=self.start.get(target.name, 100.0),
                    counters={"generation_tokens": 10.0 * n, "requests": float(n)},
                    gauges={"running": 1.0})
        return raw(target.name, self.clock.t, text)

    async def identify(self, target):
        self.identify_calls[target.name] = self.identify_calls.get(target.name, 0) + 1
        return {"host": target.host, "version": "9.9"}

    async def aclose(self):
        self.closed = True


class FakeGpuSampler(FakeSamplerBase):
    def __init__(self, clock, *, error=None, raises=False):
        self.clock, self.error, self.raises, self.closed = clock, error, raises, False

    def sample(self) -> GpuSample:
        if self.raises:
            raise OSError("nvml exploded")
        return gpu_sample(self.clock.t, error=self.error)

    def close(self):
        self.closed = True


def targets(*names):
    return tuple(Target(name=n, base_url=f"http://127.0.0.1:{i + 1}", host="127.0.0.1")
                 for i, n in enumerate(names))


def make(*names, sink=None, gpu=True, error=None):
    clock = FakeClock()
    cfg = Config(targets=targets(*names), interval_s=1.0)
    store = Store(cfg, normalize=fake_normalize, detect=fake_detect)
    scraper = FakeScraper(clock)
    sampler = FakeGpuSampler(clock, error=error) if gpu else None
    mon = Monitor(cfg, scraper=scraper, gpu_sampler=sampler, sink=sink, store=store,
                  tick_timeout_s=2.0)
    return mon, scraper, sampler, clock


async def test_tick_scrapes_all_targets_in_parallel():
    mon, scraper, _, _clock = make("a", "b", "c")
    scraper.gate, scraper.expect = asyncio.Event(), 3
    snap = await mon.tick()
    assert scraper.max_in_flight == 3
    assert [r.target for r in snap.engines] == ["a", "b", "c"]
    assert all(r.state == "ok" for r in snap.engines)
    await mon.aclose()


async def test_rates_over_ticks_and_sink_gets_everything():
    items = []
    mon, _scraper, _, clock = make("a", sink=items.append)
    for _ in range(4):
        clock.step()
        snap = await mon.tick()
    r = snap.engines[0]
    assert r.generation_tokens_per_s == pytest.approx(10.0)
    assert r.engine_version is None or isinstance(r.engine_version, str)
    kinds = [type(i).__name__ for i in items]
    assert kinds.count("RawScrape") == 4 and kinds.count("GpuSample") == 4
    assert snap.gpus and snap.gpus[0].util == 0.5
    assert len(mon.store.series("a|m", "gen_tps")) == 4
    await mon.aclose()


async def test_in_flight_target_is_skipped_then_stale_then_recovers():
    mon, scraper, _, clock = make("a", "b")
    mon.tick_timeout_s = 0.05
    scraper.hang["b"] = asyncio.Event()
    for _ in range(5):
        clock.step()
        snap = await mon.tick()
    assert scraper.calls["a"] == 5
    assert scraper.calls["b"] == 1  # never a second scrape while one is in flight
    states = {r.target: r.state for r in snap.engines}
    assert states == {"a": "ok", "b": "stale"}
    scraper.hang["b"].set()
    clock.step()
    snap = await mon.tick()
    assert {r.target: r.state for r in snap.engines}["b"] == "ok"
    assert scraper.calls["b"] == 1  # the finished scrape was ingested this tick
    clock.step()
    await mon.tick()
    assert scraper.calls["b"] == 2
    await mon.aclose()


async def test_exceptions_become_events_and_loop_carries_on():
    def bad_sink(item):
        raise ValueError("disk full")

    mon, scraper, sampler, clock = make("a", "b", sink=bad_sink)
    sampler.raises = True
    scraper.fail.add("b")
    clock.step()
    snap = await mon.tick()
    texts = [e.text for e in mon.store.events]
    assert "scrape failed: RuntimeError: boom" in texts
    assert "GPU sampling failed: OSError: nvml exploded" in texts
    assert "recorder failed: ValueError: disk full" in texts
    assert {r.target: r.state for r in snap.engines}["a"] == "ok"  # still ingested
    clock.step()
    await mon.tick()  # and the next tick works
    await mon.aclose()


async def test_identity_on_first_contact_and_after_restart():
    items = []
    mon, scraper, _, clock = make("a", sink=items.append)
    for _ in range(3):
        clock.step()
        await mon.tick()
    assert scraper.identify_calls == {"a": 1}
    raws = [i for i in items if hasattr(i, "target")]
    assert raws[0].identity == {"host": "127.0.0.1", "version": "9.9"}
    assert raws[1].identity is None
    scraper.start["a"] = 500.0  # restart
    for _ in range(3):
        clock.step()
        await mon.tick()
    assert scraper.identify_calls == {"a": 2}
    assert mon.store.snapshot(10.0).engines[0].engine_version == "9.9"
    await mon.aclose()


async def test_gpu_error_reaches_snapshot_and_close_closes():
    mon, scraper, sampler, clock = make("a", error="NVML library not found")
    clock.step()
    snap = await mon.tick()
    assert snap.gpu_error == "NVML library not found" and snap.gpus == []
    await mon.aclose()
    assert scraper.closed and sampler.closed


async def test_replay_of_sink_items_gives_identical_json():
    items = []
    mon, scraper, _, clock = make("a", "b", sink=items.append)
    for i in range(12):
        clock.step()
        if i == 6:
            scraper.start["b"] = 999.0
        await mon.tick()
    live = mon.store.snapshot(10.0).to_json("x")
    replay = Store(mon.config, normalize=fake_normalize, detect=fake_detect)
    for item in items:
        if isinstance(item, GpuSample):
            replay.ingest_gpus(item)
        else:
            replay.ingest(item)
    assert replay.snapshot(10.0).to_json("x") == live
    await mon.aclose()


async def test_no_targets_no_gpu_still_returns_snapshot():
    mon = Monitor(Config(), scraper=FakeScraper(FakeClock()), gpu_sampler=None,
                  store=Store(Config(), normalize=fake_normalize, detect=fake_detect))
    snap = await mon.tick()
    assert snap.engines == [] and snap.gpu_error is None
    await mon.aclose()


async def test_concurrent_ticks_run_one_after_the_other():
    mon, scraper, _, clock = make("a")
    clock.step()
    a, b = await asyncio.gather(mon.tick(), mon.tick())
    assert scraper.calls["a"] == 2 and mon.ticks == 2
    assert a.engines[0].state == b.engines[0].state == "ok"
    await mon.aclose()


def test_raw_helper_shape():
    r = raw("a", 1.0, "{}")
    assert r.status == "ok" and r.t_mono == 1.0


async def test_no_identify_call_while_the_scraper_brings_identity_itself():
    mon, scraper, _, clock = make("a")
    scraper.identity_pending = lambda name: True  # as Scraper(defer_identity=True) after contact
    clock.step()
    await mon.tick()
    assert scraper.identify_calls == {}
    await mon.aclose()


async def test_a_large_body_is_parsed_off_the_event_loop(monkeypatch):
    """A body over THREAD_PARSE_BYTES is parsed in a worker thread (the UI's loop keeps
    running) and gives the same row as a small one."""
    import threading

    from llmtop.model import RawScrape
    from llmtop.monitor import THREAD_PARSE_BYTES
    from tests.conftest import fixture_text

    real = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")
    big = real + "# " + "x" * THREAD_PARSE_BYTES + "\n"
    seen: list[str] = []

    class Scraper(FakeScraperBase):
        def __init__(self, text: str) -> None:
            self.text = text

        async def scrape(self, target: Target) -> RawScrape:
            return RawScrape(target=target.name, url=target.base_url, t_wall=1.0, t_mono=1.0,
                             status="ok", body=self.text, engine_hint="vllm")

        async def identify(self, target: Target) -> dict:
            return {}

        async def aclose(self) -> None:
            return None

    t = Target(name="v", base_url="http://127.0.0.1:9", engine="vllm")
    cfg = Config(targets=(t,))
    rows = []
    for text in (real, big):
        mon = Monitor(cfg, scraper=Scraper(text))
        orig = mon.store.parse_raw

        def spy(raw, orig=orig):
            seen.append(threading.current_thread().name)
            return orig(raw)

        monkeypatch.setattr(mon.store, "parse_raw", spy)
        snap = await mon.tick()
        rows.append(snap.engines[0])
        await mon.aclose()
    assert len(seen) == 1 and seen[0] != threading.main_thread().name
    small_row, big_row = rows
    assert big_row.state == small_row.state == "ok"
    assert (big_row.running, big_row.waiting) == (small_row.running, small_row.waiting) == (8, 22)


async def test_a_sampler_with_sample_async_is_awaited_on_the_loop_not_a_thread():
    import threading

    class AsyncSampler(FakeGpuSampler):
        threads: list[str] = []
        aclosed = False

        def sample(self):
            raise AssertionError("the thread path must not be taken")

        async def sample_async(self):
            self.threads.append(threading.current_thread().name)
            return gpu_sample(self.clock.t)

        async def aclose(self):
            self.aclosed = True

    clock = FakeClock()
    cfg = Config(targets=targets("a"), interval_s=1.0)
    sampler = AsyncSampler(clock)
    mon = Monitor(cfg, scraper=FakeScraper(clock), gpu_sampler=sampler,
                  store=Store(cfg, normalize=fake_normalize, detect=fake_detect))
    for _ in range(2):
        clock.step()
        snap = await mon.tick()
    assert snap.gpus and snap.gpus[0].util == 0.5
    assert sampler.threads == [threading.current_thread().name] * 2
    await mon.aclose()
    assert sampler.aclosed and not sampler.closed


async def test_a_held_gpu_sample_is_fed_without_a_task_and_none_falls_back(monkeypatch):
    """``held_sample()`` answering: fed at once, no task made for the GPU; None: the
    sampler is asked as before (here ``sample_async``)."""
    import asyncio as aio

    class HeldSampler(FakeGpuSampler):
        held = True
        asked = 0

        def held_sample(self):
            return gpu_sample(self.clock.t) if self.held else None

        async def sample_async(self):
            self.asked += 1
            return gpu_sample(self.clock.t)

    clock = FakeClock()
    cfg = Config(targets=targets("a"), interval_s=1.0)
    sampler = HeldSampler(clock)
    mon = Monitor(cfg, scraper=FakeScraper(clock), gpu_sampler=sampler,
                  store=Store(cfg, normalize=fake_normalize, detect=fake_detect))
    made: list[object] = []
    real = aio.ensure_future
    monkeypatch.setattr(aio, "ensure_future", lambda c, **kw: made.append(c) or real(c, **kw))
    clock.step()
    snap = await mon.tick()
    assert snap.gpus and snap.gpus[0].util == 0.5 and sampler.asked == 0
    assert len(made) == 1  # the scrape's task only
    sampler.held = False
    clock.step()
    snap = await mon.tick()
    assert snap.gpus and sampler.asked == 1 and len(made) == 3
    await mon.aclose()
