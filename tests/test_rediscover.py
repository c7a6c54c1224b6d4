"""No TARGET given: the monitor searches this machine before its first tick and every 10 s
after, so an engine started after llmtop joins it (``llmtop.discovery.rediscovery``). The
searches here are the real ``llmtop.discovery`` on a loopback port serving a real vLLM
scrape."""

from __future__ import annotations

import asyncio

from llmtop.config import Config, Target
from llmtop.discovery import REDISCOVER_S, Rediscovery, new_targets
from llmtop.discovery.search import discover
from llmtop.monitor import Monitor
from tests.test_monitor_prefetch import engine  # noqa: F401  (the fixture)


def _port(srv) -> int:
    return srv.server_address[1]


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _find_on(ports: list[int]):
    """The real search, on the ports in ``ports`` (a list the test changes) and no /proc."""
    async def find(config: Config) -> list[Target]:
        return await discover(config, ports=tuple(ports), proc_root="/nonexistent")
    return find


def _t(name: str, url: str) -> Target:
    return Target(name, url)


def test_new_targets_skip_what_is_watched_by_name_or_url():
    have = [_t("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"), _t("mine", "http://h:9/")]
    found = [_t("vllm@127.0.0.1:8000", "http://127.0.0.1:8000"),
             _t("sglang@h:9", "http://h:9"),
             _t("triton@127.0.0.1:8002", "http://127.0.0.1:8002"),
             _t("triton@127.0.0.1:8002", "http://127.0.0.1:8002")]
    assert [t.name for t in new_targets(have, found)] == ["triton@127.0.0.1:8002"]


async def test_the_search_runs_again_only_when_due_and_never_raises():
    calls: list[int] = []
    clock = Clock()

    async def find(config: Config) -> list[Target]:
        calls.append(1)
        if len(calls) == 3:
            raise OSError("a bug in a search")
        return [_t(f"e{len(calls)}", f"http://127.0.0.1:{len(calls)}")]

    r = Rediscovery(Config(), every_s=REDISCOVER_S, find=find, clock=clock)
    assert not r.searched
    assert [t.name for t in await r.first()] == ["e1"] and r.searched
    assert r.poll() == [] and len(calls) == 1  # not due yet: no search
    clock.t += REDISCOVER_S
    assert r.poll() == []  # due: started in the background
    await asyncio.sleep(0)
    assert len(calls) == 2
    assert [t.name for t in r.poll()] == ["e2"]  # finished: its engines; the next not due
    await asyncio.sleep(0)
    assert len(calls) == 2
    clock.t += REDISCOVER_S
    r.poll()
    await asyncio.sleep(0)
    assert r.poll() == [] and len(calls) == 3  # the failed search found nothing, no crash
    await r.aclose()


async def test_no_target_the_first_tick_shows_the_engine_on_this_machine(engine):  # noqa: F811
    mon = Monitor(Config(), rediscover=Rediscovery(Config(), find=_find_on([_port(engine)])))
    try:
        snap = await mon.tick()
        name = f"vllm@127.0.0.1:{_port(engine)}"
        assert [t.name for t in mon.targets] == [name]
        row = next(r for r in snap.engines if r.target == name)
        assert row.engine == "vllm" and row.state == "ok"
        assert any(e.target == name and "found on this machine" in e.text
                   for e in mon.store.events)
    finally:
        await mon.aclose()


async def test_an_engine_started_later_joins_and_one_found_twice_is_watched_once(
        engine):  # noqa: F811
    ports: list[int] = []
    clock = Clock()
    r = Rediscovery(Config(), find=_find_on(ports), clock=clock)
    mon = Monitor(Config(), rediscover=r)
    try:
        snap = await mon.tick()
        assert mon.targets == [] and snap.engines == []  # nothing yet
        ports.append(_port(engine))  # the engine starts
        await mon.tick()
        assert mon.targets == []  # the next search is not due: no search per tick
        clock.t += REDISCOVER_S
        for _ in range(40):  # the search runs beside the ticks (between them, as live)
            await asyncio.sleep(0.05)
            snap = await mon.tick()
            if any(r.state == "ok" for r in snap.engines):
                break
        assert [t.name for t in mon.targets] == [f"vllm@127.0.0.1:{_port(engine)}"]
        assert [r.state for r in snap.engines] == ["ok"]
        clock.t += REDISCOVER_S
        for _ in range(10):
            await asyncio.sleep(0.05)
            await mon.tick()
        assert len(mon.targets) == 1  # found again: not added twice
    finally:
        await mon.aclose()


async def test_prefetch_searches_then_scrapes_before_the_first_tick(engine):  # noqa: F811
    mon = Monitor(Config(), rediscover=Rediscovery(Config(), find=_find_on([_port(engine)])))
    mon.prefetch()
    try:
        for _ in range(100):  # the thread's search and scrape, before any tick
            if engine.metrics_gets:
                break
            await asyncio.sleep(0.05)
        assert engine.metrics_gets >= 1
        snap = await mon.tick()
        assert [r.state for r in snap.engines] == ["ok"]
    finally:
        await mon.aclose()


async def test_named_targets_never_search(engine):  # noqa: F811
    port = _port(engine)
    mon = Monitor.from_config(Config(targets=(Target("mine", f"http://127.0.0.1:{port}",
                                                     engine="vllm"),)))
    try:
        await mon.tick()
        assert mon.rediscovery is None and [t.name for t in mon.targets] == ["mine"]
    finally:
        await mon.aclose()


def test_router_backends_become_targets_once():
    from llmtop.discovery import backend_targets

    have = [Target(name="localhost:8001", base_url="http://localhost:8001", host="localhost",
                   port=8001)]
    urls = ["http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8002/",
            "123", "pod1-rank-0", "https://localhost/v1", "http://127.0.1.5:8000/v1",
            "127.0.1.7:8000", "http://[::1]:8003", "garbage://x:1"]
    got = backend_targets(urls, have)
    assert [t.base_url for t in got] == ["http://127.0.0.1:8002", "http://127.0.1.5:8000",
                                         "http://127.0.1.7:8000", "http://[::1]:8003"]
    assert all(t.metrics_path is None for t in got)  # /v1 of an api_base is not metrics
def _in_pod(name: str, url: str, pod: str) -> Target:
    from llmtop.model import Container

    return Target(name, url, engine="vllm", container=Container(
        "containerd", None, "vllm", pod, "prod", None))


def test_moved_targets_pair_the_same_pod_at_a_new_address():
    from llmtop.discovery import moved_targets

    old = _in_pod("vllm@127.0.1.5:8000", "http://127.0.1.5:8000", "vllm-0")
    back = _in_pod("vllm@127.0.1.9:8000", "http://127.0.1.9:8000", "vllm-0")
    other = _in_pod("vllm@127.0.1.7:8000", "http://127.0.1.7:8000", "vllm-1")
    plain = _t("vllm@127.0.0.1:8000", "http://127.0.0.1:8000")
    assert moved_targets([old, plain], [back, other, plain]) == [(old, back)]
    assert moved_targets([old], [old]) == []  # same address: nothing moved
    assert new_targets([old, plain], [back, other]) == [back, other]  # moved is not new


async def test_a_restarted_pod_keeps_its_row_and_a_new_pod_is_a_new_row(
        engine):  # noqa: F811
    import threading
    from http.server import ThreadingHTTPServer

    second = ThreadingHTTPServer(("127.0.0.1", 0), engine.RequestHandlerClass)
    second.metrics_gets = 0  # type: ignore[attr-defined]
    threading.Thread(target=second.serve_forever, daemon=True).start()
    a, b = _port(engine), _port(second)
    found = [_in_pod(f"vllm@127.0.0.1:{a}", f"http://127.0.0.1:{a}", "vllm-0")]
    clock = Clock()

    async def find(config: Config) -> list[Target]:
        return list(found)

    r = Rediscovery(Config(), find=find, clock=clock)
    r.notes = ["2 engine processes in other network namespaces could not be read: run as "
               "root, or give their addresses"]
    mon = Monitor(Config(), rediscover=r, tick_timeout_s=0.2)
    try:
        snap = await mon.tick()
        [row] = snap.engines
        assert row.container is not None and row.container.label == "pod prod/vllm-0"
        mon.store.event("info", None, "another line")  # the log drops only a direct repeat
        found[:] = [_in_pod(f"vllm@127.0.0.1:{b}", f"http://127.0.0.1:{b}", "vllm-0")]
        clock.t += REDISCOVER_S
        for _ in range(40):
            await asyncio.sleep(0.01)
            await mon.tick()
            if mon.targets[0].base_url.endswith(str(b)):
                break
        assert [(t.name, t.base_url) for t in mon.targets] == [
            (f"vllm@127.0.0.1:{a}", f"http://127.0.0.1:{b}")]  # same row, new address
        assert any("pod prod/vllm-0 is back at" in e.text for e in mon.store.events)
        found.append(_in_pod(f"vllm@127.0.0.1:{a}", f"http://127.0.0.1:{a}", "vllm-1"))
        clock.t += REDISCOVER_S
        for _ in range(40):
            await asyncio.sleep(0.01)
            snap = await mon.tick()
            if len(mon.targets) == 2 and all(r.container for r in snap.engines):
                break
        labels = sorted(r.container.label for r in snap.engines if r.container)
        assert labels == ["pod prod/vllm-0", "pod prod/vllm-1"]  # a new pod: a new row
        said = [e for e in mon.store.events if "could not be read" in e.text]
        assert len(said) == 1 and said[0].level == "warn"  # said once, not every search
    finally:
        await mon.aclose()
        second.shutdown()
        second.server_close()
