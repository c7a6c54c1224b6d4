"""The monitor's side polls: one table (``monitor.sidepolls.POLLS``), one mechanism; the
``/workers`` throttle reads ``llmtop.clock`` (scaled with the demo's time), not the real
clock."""

from __future__ import annotations

import asyncio

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.model import SCRAPE_SLOTS, RawScrape
from llmtop.monitor import Monitor
from llmtop.monitor.sidepolls import POLLS, WORKERS_EVERY_S, PollContext, PollKind, SidePolls
from tests.monitor_fakes import FakeScraperBase


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class RouterScraper(FakeScraperBase):
    def __init__(self) -> None:
        self.workers_asked = 0

    async def scrape(self, t: Target) -> RawScrape:
        return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1.7e9,
                         t_mono=clock.monotonic(), status="down", error="refused")

    async def workers(self, t: Target) -> RawScrape:
        self.workers_asked += 1
        return RawScrape(target=t.name, url=str(t.api_url) + "/workers", t_wall=1.7e9,
                         t_mono=clock.monotonic(), status="ok", body="{}", kind="workers")


async def test_the_workers_throttle_runs_on_the_llmtop_clock(monkeypatch: pytest.MonkeyPatch):
    now = _Clock()
    monkeypatch.setattr(clock, "monotonic", now)
    router = Target(name="r", base_url="http://127.0.0.1:29000", engine="sglang-router",
                    api_url="http://127.0.0.1:30000")
    scraper = RouterScraper()
    mon = Monitor(Config(targets=(router,)), scraper=scraper, gpu_sampler=None)
    try:
        await mon.tick()
        assert scraper.workers_asked == 1
        now.t += WORKERS_EVERY_S / 2
        await mon.tick()
        assert scraper.workers_asked == 1  # not due yet
        now.t += WORKERS_EVERY_S / 2
        await mon.tick()
        assert scraper.workers_asked == 2  # due by the llmtop clock
    finally:
        await mon.aclose()


async def test_one_poll_in_flight_per_kind_and_target_and_a_new_kind_is_one_entry():
    gate = asyncio.Event()
    asked: list[tuple[str, str]] = []

    async def fetch(kind: str, t: Target) -> RawScrape:
        asked.append((kind, t.name))
        await gate.wait()
        return RawScrape(target=t.name, url=t.base_url, t_wall=1.0, t_mono=1.0, status="ok",
                         kind=kind)

    logs = PollKind("logs", "log poll", wanted=lambda t, ctx: t.name != "b",
                    fetch=lambda scraper, t, ctx: fetch("logs", t))
    slots = PollKind(SCRAPE_SLOTS, "/slots poll",
                     wanted=lambda t, ctx: ctx.engine_of(t.name) == "llamacpp",
                     fetch=lambda scraper, t, ctx: fetch(SCRAPE_SLOTS, t))
    polls = SidePolls(kinds=(slots, logs))
    ts = [Target(name=n, base_url=f"http://127.0.0.1:{i + 1}") for i, n in enumerate("abc")]
    ctx = PollContext(engine_of=lambda name: "llamacpp" if name == "a" else "vllm")
    polls.start(FakeScraperBase(), ts, ctx)
    polls.start(FakeScraperBase(), ts, ctx)  # all still in flight: none started again
    await asyncio.sleep(0)
    assert sorted(asked) == [("logs", "a"), ("logs", "c"), (SCRAPE_SLOTS, "a")]
    assert polls.done() == []
    gate.set()
    await asyncio.wait(polls.waiting())
    got = [(k.kind, name, f.result().kind) for k, name, f in polls.done()]
    assert got == [(SCRAPE_SLOTS, "a", SCRAPE_SLOTS), ("logs", "a", "logs"),
                   ("logs", "c", "logs")]  # fed in table order
    assert polls.waiting() == []


def test_the_table_holds_slots_workers_and_health():
    assert [k.kind for k in POLLS] == ["slots", "workers", "health"]
    assert [k.every_s for k in POLLS] == [None, WORKERS_EVERY_S, None]
