"""The monitor's target set: router backends have a life cycle (dropped after a grace period
once no router names them; a backend that is down is scraped less and less often, every
tick again once it answers), with an injected clock."""

from __future__ import annotations

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.monitor.targetset import BACKEND_GRACE_S, BACKOFF_CAP_S, TargetSet, next_scrape_in
from tests.conftest import fixture_text
from tests.monitor_fakes import FakeScraperBase

PD = fixture_text("routers/real/sglang-router-pd.txt")
A, B = "http://127.0.0.1:41235", "http://127.0.0.1:35871"  # the backends the capture names
ROUTER = Target(name="router", base_url="http://127.0.0.1:29000", engine="sglang-router")


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Store:
    """What the target set asks of the store: the routers' backend URLs, events, forget."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.events: list[tuple[str, str | None, str]] = []
        self.forgotten: list[str] = []

    def backend_urls(self) -> list[str]:
        return list(self.urls)

    def event(self, level: str, target: str | None, text: str, **_kw: object) -> None:
        self.events.append((level, target, text))

    def forget(self, name: str) -> None:
        self.forgotten.append(name)

    def learn(self, target: Target) -> None:
        return None


def _set(urls: list[str], now: _Clock) -> tuple[TargetSet, _Store]:
    store = _Store(urls)
    ts = TargetSet(Config(targets=(ROUTER,), interval_s=1.0), store,  # type: ignore[arg-type]
                   FakeScraperBase(), None, now=now)
    return ts, store


def test_a_backend_no_router_names_is_dropped_after_the_grace_period():
    now = _Clock()
    ts, store = _set([A, B], now)
    assert ts.add_backends() == []
    names = [t.name for t in ts.targets]
    assert len(names) == 3
    a_name, b_name = names[1], names[2]
    store.urls = [A]  # the router re-lists its pool without B
    now.t += BACKEND_GRACE_S / 2
    assert ts.add_backends() == []  # within the grace period: kept
    store.urls = [A, B]  # named again before the grace ran out: kept, its clock restarts
    now.t += BACKEND_GRACE_S / 2 + 1
    assert ts.add_backends() == []
    store.urls = [A]
    now.t += BACKEND_GRACE_S - 1
    assert ts.add_backends() == []
    now.t += 2
    assert ts.add_backends() == [b_name]
    assert [t.name for t in ts.targets] == ["router", a_name]
    assert store.forgotten == [b_name]
    dropped = [e for e in store.events if "no router names it" in e[2]]
    assert dropped == [("info", b_name, "dropped: no router names it any more")]
    now.t += 10 * BACKEND_GRACE_S
    assert ts.add_backends() == [] and len(store.events) == 3  # said once; A stays
    assert [t.name for t in ts.targets] == ["router", a_name]


def test_a_dead_backend_backs_off_and_is_scraped_every_tick_once_it_answers():
    now = _Clock()
    ts, _ = _set([A], now)
    ts.add_backends()
    name = ts.targets[1].name
    assert ts.due("router") and ts.due(name)

    def answer(status: str) -> None:
        ts.answered(RawScrape(target=name, url=A, t_wall=0.0, t_mono=now.t, status=status))

    waits = []
    for _ in range(9):
        answer("down")
        waited = 0
        while not ts.due(name):
            now.t += 1.0
            waited += 1
            assert ts.due("router")  # a target that is not a backend: every tick
        waits.append(waited)
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]  # doubling, capped
    answer("ok")
    assert ts.due(name)
    answer("down")  # down again: the back-off starts over
    assert not ts.due(name)
    now.t += 1.0
    assert ts.due(name)


def test_next_scrape_in_doubles_up_to_the_cap():
    assert [next_scrape_in(n, 2.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert next_scrape_in(50, 2.0) == BACKOFF_CAP_S


class _RouterAndDeadBackends(FakeScraperBase):
    def __init__(self) -> None:
        self.asked: dict[str, int] = {}

    async def scrape(self, t: Target) -> RawScrape:
        self.asked[t.name] = self.asked.get(t.name, 0) + 1
        if t.name == ROUTER.name:
            return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1.7e9,
                             t_mono=clock.monotonic(), status="ok", body=PD,
                             engine_hint="sglang-router")
        return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1.7e9,
                         t_mono=clock.monotonic(), status="down", error="timeout after 2.0s")


async def test_the_monitor_does_not_scrape_a_dead_backend_every_tick(
        monkeypatch: pytest.MonkeyPatch):
    now = _Clock()
    monkeypatch.setattr(clock, "monotonic", now)
    scraper = _RouterAndDeadBackends()
    mon = Monitor(Config(targets=(ROUTER,), interval_s=1.0), scraper=scraper, gpu_sampler=None)
    try:
        for _ in range(40):
            await mon.tick()
            now.t += 1.0
    finally:
        await mon.aclose()
    backends = {n: k for n, k in scraper.asked.items() if n != ROUTER.name}
    assert scraper.asked[ROUTER.name] == 40 and len(backends) == 2
    assert all(k <= 6 for k in backends.values()), backends  # 1+1+2+4+8+16 s: 6 in 39 s
