"""The monitor's target set: router backends have a life cycle (dropped after a grace period
once no router names them; a backend that is down is scraped less and less often, every
tick again once it answers), and so have container and pod engines discovery found (dropped
once searches no longer find them and they do not answer), with an injected clock."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.discovery import Rediscovery
from llmtop.model import Container, RawScrape
from llmtop.monitor import Monitor
from llmtop.monitor.targetset import (
    BACKEND_GRACE_S,
    BACKOFF_CAP_S,
    FOUND_GRACE_S,
    TargetSet,
    next_scrape_in,
)
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
        self.status: dict[str, str] = {}
        """The latest scrape's status per target (what ``history_of`` answers)."""

    def history_of(self, name: str) -> SimpleNamespace | None:
        st = self.status.get(name)
        return None if st is None else SimpleNamespace(status=st)

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


def _pod(name: str, ip: str, pod: str | None = None) -> Target:
    c = None if pod is None else Container(runtime="containerd", name="vllm", pod=pod,
                                           namespace="serve")
    return Target(name=name, base_url=f"http://{ip}:8000", engine="vllm", host=ip, port=8000,
                  container=c)


def test_a_pod_searches_no_longer_find_is_dropped_once_it_stops_answering():
    now = _Clock()
    ts, store = _set([], now)
    old = _pod("vllm-a", "127.0.5.1", pod="vllm-7f-a")
    new = _pod("vllm-b", "127.0.5.2", pod="vllm-9c-b")  # the Deployment's replacement
    bare = _pod("vllm-host", "127.0.0.9")  # a process outside any container
    assert ts.add_found([old, bare], [], searched=True) == []
    store.status.update({"vllm-a": "down", "vllm-host": "down"})
    now.t += FOUND_GRACE_S / 2
    assert ts.add_found([new], [], searched=True) == []  # within the grace: still watched
    store.status["vllm-b"] = "ok"
    now.t += FOUND_GRACE_S / 2 + 1
    assert ts.add_found([], [], searched=False) == []  # no whole search: nothing judged
    assert ts.add_found([new], [], searched=True) == ["vllm-a"]
    assert [t.name for t in ts.targets] == ["router", "vllm-host", "vllm-b"]
    assert store.forgotten == ["vllm-a"]
    assert any(t == "vllm-a" and "dropped" in text and "pod serve/vllm-7f-a" in text
               for _, t, text in store.events), store.events
    now.t += 10 * FOUND_GRACE_S  # a bare process, a named target, one answering: kept
    assert ts.add_found([], [], searched=True) == []
    assert [t.name for t in ts.targets] == ["router", "vllm-host", "vllm-b"]


def test_a_gone_pod_that_still_answers_and_a_moved_pod_keep_their_rows():
    now = _Clock()
    ts, store = _set([], now)
    a = _pod("vllm-a", "127.0.5.1", pod="vllm-0")  # a StatefulSet pod: same name, new IP
    b = _pod("vllm-b", "127.0.5.3", pod="vllm-x")
    ts.add_found([a, b], [], searched=True)
    store.status.update({"vllm-a": "down", "vllm-b": "ok"})
    moved = _pod("vllm-a2", "127.0.5.2", pod="vllm-0")
    for _ in range(3):
        now.t += FOUND_GRACE_S
        assert ts.add_found([moved], [], searched=True) == []
    assert [(t.name, t.base_url) for t in ts.targets] == [
        ("router", ROUTER.base_url), ("vllm-a", "http://127.0.5.2:8000"),
        ("vllm-b", "http://127.0.5.3:8000")]
    store.status["vllm-b"] = "down"  # now it stops answering too
    now.t += 1
    assert ts.add_found([moved], [], searched=True) == ["vllm-b"]


class _PodScraper(FakeScraperBase):
    """Answers for the pods alive now (``live``); every other address is refused."""

    def __init__(self) -> None:
        self.live: set[str] = set()

    async def scrape(self, t: Target) -> RawScrape:
        up = t.base_url in self.live
        return RawScrape(target=t.name, url=t.base_url + "/metrics", t_wall=1.7e9,
                         t_mono=clock.monotonic(), status="ok" if up else "down",
                         body=fixture_text("metrics/vllm-real-cpu-v0.32.0-calm-a.txt")
                         if up else None, error=None if up else "connection refused",
                         engine_hint="vllm")


async def test_a_day_of_replaced_pods_keeps_the_target_list_bounded(
        monkeypatch: pytest.MonkeyPatch):
    now = _Clock()
    monkeypatch.setattr(clock, "monotonic", now)
    scraper = _PodScraper()
    gen = [0]

    def pods() -> list[Target]:
        return [_pod(f"vllm@{i}-{gen[0]}", f"127.0.{10 + i}.{gen[0] % 250 + 1}",
                     pod=f"vllm-{gen[0]:x}-{i}") for i in range(2)]

    async def find(_config: Config) -> list[Target]:
        return pods()

    config = Config(targets=(), interval_s=5.0, discover=False)
    mon = Monitor(config, scraper=scraper, gpu_sampler=None,
                  rediscover=Rediscovery(config, find=find, clock=now))
    most = 0
    try:
        for tick in range(720):  # an hour of 5 s ticks, the pods replaced every 2 minutes
            gen[0] = tick // 24
            scraper.live = {t.base_url for t in pods()}
            await mon.tick()
            await mon.tick()  # the background search's answer lands on the next tick
            most = max(most, len(mon.targets))
            now.t += 5.0
    finally:
        await mon.aclose()
    # 30 generations of 2 pods were found; at most the grace's worth are watched at once
    per_grace = 2 * (FOUND_GRACE_S / 120 + 2)
    assert 2 < most <= per_grace, most
    dropped = [e for e in mon.store.events if "dropped" in e.text]
    assert len(dropped) >= 2 * 25, len(dropped)
