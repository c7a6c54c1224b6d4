"""The simulated serving stack (``demo/stack.py``): the router's /metrics against the real
``vllm-router`` captures, round robin shares, and the raw signals of each stack scenario.

Each test runs a stack in this process on a clock ``SCALE`` times as fast as the wall clock
(``LLMTOP_TIME_SCALE``), so a 2 s health-check interval passes in a fraction of a second.
A test waits for the simulation to reach a state (``until``), however long a loaded machine
takes, and judges that state; the only bound is a hang guard (``HANG_S``), never a measure.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llmtop import clock
from llmtop.demo import formats_router
from llmtop.demo.server import DemoServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "routers"
SCALE = 12.0
HANG_S = 1200.0
"""Clock seconds (100 s of wall time) after which ``until`` gives up: a simulation that
never reaches the state, not one that is late."""


@pytest.fixture
def stack(demo_factory, monkeypatch):
    """``make(scenario, baseline_s)``: a stack scenario with its traffic, on the fast clock."""
    monkeypatch.setenv(clock.ENV, clock.env_value(SCALE))

    async def make(scenario: str, baseline_s: float = 0.0) -> DemoServer:
        return await demo_factory(scenario=scenario, baseline_s=baseline_s, background=True)

    return make


async def wait(clock_s: float) -> None:
    await clock.sleep(clock_s)


async def until(check) -> None:
    """Poll ``check()`` (sync or async) every 0.25 clock seconds until it is true; fail
    only when it is still false after ``HANG_S`` (a loaded machine runs the simulation late,
    so no tighter bound judges it)."""
    end = clock.monotonic() + HANG_S
    while True:
        ok = check()
        if asyncio.iscoroutine(ok):
            ok = await ok
        if ok:
            return
        if clock.monotonic() > end:
            pytest.fail(f"the simulation never reached the state in {HANG_S:.0f} clock s")
        await clock.sleep(0.25)


def shape(text: str) -> dict[str, tuple[str, frozenset[tuple[str, ...]], tuple[str, ...]]]:
    """family -> (type, the label-name tuples of its samples in order, bucket bounds)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        labels = frozenset(tuple(k for k in s.labels if k not in ("le", "quantile"))
                           for s in fam.samples)
        les = tuple(dict.fromkeys(s.labels["le"] for s in fam.samples if "le" in s.labels))
        out[fam.name] = (fam.type, labels, les)
    return out


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def get(v: dict, name: str, **labels: str) -> float:
    return v.get((name, tuple(sorted(labels.items()))), 0.0)


async def scrape(url: str) -> str:
    async with httpx.AsyncClient() as c:
        r = await c.get(url + "/metrics", timeout=5)
        assert r.status_code == 200
        return r.text


async def test_router_metrics_carry_exactly_the_real_routers_names_and_labels(stack):
    """Round robin with a backend down (retries, breaker, health) and P/D: together every
    family of the real captures, with the same type, label names (in their order), buckets
    and layout; nothing the real router does not have."""
    down = await stack("routing-down", baseline_s=1.0)
    pd = await stack("kv-transfer", baseline_s=100.0)
    r = down.stack.router
    await until(lambda: r.m.value("vllm_router_worker_health", r.backends[1].w) == 0
                and r.backends[1].breaker_open)  # three failed health checks, 2 s apart
    demo = {**shape(await scrape(down.stack.base_url)), **shape(await scrape(pd.stack.base_url))}
    real: dict = {}
    for f in ("vllm-router-rr.txt", "vllm-router-pd.txt", "vllm-router-down.txt"):
        for name, (typ, labels, les) in shape((FIXTURES / f).read_text()).items():
            _t, l0, b0 = real.get(name, (typ, frozenset(), les))
            real[name] = (typ, l0 | labels, b0)
    assert set(demo) == set(real), (set(demo) ^ set(real))
    for name, (typ, labels, les) in demo.items():
        assert (typ, les) == (real[name][0], real[name][2]), name
        assert labels == real[name][1], (name, labels, real[name][1])
    body = formats_router.render(down.stack.router.m).decode()
    assert "# HELP" not in body and "_created" not in body and "\n\n# TYPE" in body
    assert body.endswith("\n\n")


def test_round_robin_shares_follow_the_policy():
    """Round robin over healthy backends: shares differ by at most one request; a backend
    the router distrusts (unhealthy or breaker open) gets none."""
    from llmtop.demo.stack import Backend, SimRouter
    from llmtop.demo.stack_scenarios import STACKS

    class Site:
        def __init__(self, port: int) -> None:
            self.base_url = f"http://127.0.0.1:{port}"
            self.listening = True

    bs = [Backend(Site(p), "both") for p in (1, 2, 3)]
    r = SimRouter(bs, STACKS["stack"])
    picks = [r.pick("both").url for _ in range(30)]
    assert {u: picks.count(u) for u in picks} == {b.url: 10 for b in bs}
    bs[1].site.listening = False
    for _ in range(3):
        r.check_health()
    assert not bs[1].healthy
    assert bs[1].url not in {r.pick("both").url for _ in range(10)}
    for _ in range(5):
        r.outcome(bs[2], False)
    assert bs[2].breaker_open and r.m.value("vllm_router_cb_state", bs[2].w) == 1
    assert {r.pick("both").url for _ in range(5)} == {bs[0].url}


async def test_routing_queues_the_one_seat_backend_while_the_other_has_room(stack):
    s = await stack("routing", baseline_s=1.0)
    one, eight = s.sites
    await until(lambda: len(one.engine.waiting) >= 4)
    assert one.engine.settings.max_num_seqs == 1 and eight.engine.settings.max_num_seqs == 8
    assert len(one.engine.waiting) >= 4 and len(eight.engine.waiting) == 0
    assert len(eight.engine.running) < 8
    v = values(await scrape(s.stack.base_url))
    a = get(v, "vllm_router_processed_requests_total", worker=one.base_url)
    b = get(v, "vllm_router_processed_requests_total", worker=eight.base_url)
    assert a + b >= 10 and abs(a - b) <= 1  # round robin: the same share each


async def test_routing_down_opens_the_breaker_and_marks_it_unhealthy(stack):
    s = await stack("routing-down", baseline_s=1.0)
    up, down = s.sites
    r = s.stack.router
    await until(lambda: not r.backends[1].healthy and r.backends[1].breaker_open)
    assert not down.listening and up.listening
    v = values(await scrape(s.stack.base_url))
    assert get(v, "vllm_router_worker_health", worker=down.base_url) == 0
    assert get(v, "vllm_router_cb_state", worker=down.base_url) == 1
    assert get(v, "vllm_router_worker_health", worker=up.base_url) == 1
    assert get(v, "vllm_router_cb_state", worker=up.base_url) == 0
    assert get(v, "vllm_router_cb_outcomes_total", worker=down.base_url, outcome="failure") >= 5
    assert sum(x for (n, _l), x in v.items() if n == "vllm_router_retries_total") >= 1
    assert get(v, "vllm_router_active_workers") == 2  # as the real router: still registered


async def test_pd_balance_saturates_prefill_while_decode_has_room(stack):
    s = await stack("pd-balance", baseline_s=0.5)
    pre, *dec = s.sites
    await until(lambda: len(pre.engine.waiting) >= 10)
    assert [x.engine.kv_role for x in s.sites] == ["prefill", "decode", "decode"]
    assert len(pre.engine.waiting) >= 10
    for d in dec:
        assert len(d.engine.waiting) <= 2 and len(d.engine.running) < 32
    v = values(await scrape(s.stack.base_url))
    assert get(v, "vllm_router_pd_prefill_occupancy", worker=pre.base_url,
               rank="aggregate") >= 10


async def test_kv_transfer_takes_most_of_ttft_and_some_fail(stack):
    s = await stack("kv-transfer", baseline_s=0.0)  # the slow link from the start
    pre, dec = s.sites
    st = dec.engine.stats
    await until(lambda: st.c["nixl_failed"] >= 1 and st.hist("nixl_xfer").count >= 5)
    v = values(await scrape(dec.base_url))
    base = {"engine": "0", "model_name": dec.engine.model}
    n = get(v, "vllm:nixl_xfer_time_seconds_count", **base)
    xfer = get(v, "vllm:nixl_xfer_time_seconds_sum", **base) / n
    ttft = (get(v, "vllm:time_to_first_token_seconds_sum", **base)
            / get(v, "vllm:time_to_first_token_seconds_count", **base))
    assert n >= 5 and xfer > 3 * ttft, (xfer, ttft)
    assert get(v, "vllm:nixl_num_failed_transfers_total", **base) >= 1
    assert get(v, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer",
               **base) > 0
    r = values(await scrape(s.stack.base_url))
    assert get(r, "vllm_router_pd_decode_pending_seconds_count") >= n
    assert get(r, "vllm_router_pd_decode_pending_seconds", quantile="0.5") > 0.1
    pv = values(await scrape(pre.base_url))
    assert get(pv, "vllm:nixl_xfer_time_seconds_count", **base) == 0  # read by the decode side


async def test_stuck_engine_holds_requests_makes_no_token_and_answers_health(stack):
    s = await stack("stuck", baseline_s=1.0)
    _ok, stuck = s.sites
    await until(lambda: stuck.engine.stalled and len(stuck.engine.waiting) >= 1)
    gen0 = stuck.engine.stats.c["generation_tokens"]
    await wait(4.0)
    e = stuck.engine
    assert e.stalled and len(e.running) + len(e.waiting) >= 2
    assert e.stats.c["generation_tokens"] == gen0 > 0
    async with httpx.AsyncClient() as c:
        assert (await c.get(stuck.base_url + "/health")).status_code == 200
    v = values(await scrape(s.stack.base_url))
    assert get(v, "vllm_router_worker_health", worker=stuck.base_url) == 1


async def test_calm_stack_and_requests_over_http(stack):
    s = await stack("stack")
    await until(lambda: all(x.engine.stats.c["generation_tokens"] > 0 for x in s.sites))
    for es in s.sites:
        assert len(es.engine.waiting) == 0 and es.engine.stats.c["generation_tokens"] > 0
    async with httpx.AsyncClient() as c:
        r = await c.post(s.stack.base_url + "/v1/completions",
                         json={"model": s.sites[0].engine.model, "prompt": "hello there",
                               "max_tokens": 3, "ignore_eos": True}, timeout=10)
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
    v = values(await scrape(s.stack.base_url))
    a, b = (get(v, "vllm_router_processed_requests_total", worker=x.base_url) for x in s.sites)
    assert a > 0 and abs(a - b) <= 1
    assert all(get(v, "vllm_router_worker_health", worker=x.base_url) == 1 for x in s.sites)


async def test_pd_engines_add_the_nixl_families_of_the_source(stack):
    """A P/D engine's /metrics: vLLM's families plus exactly NixlPromMetrics' (names, types,
    labels, buckets, HELP as in the source); plain engines have none (``test_formats``)."""
    from tests.demo.test_formats import DATA, _compare, vllm_real
    from tests.demo.test_formats import shape as fshape

    s = await stack("kv-transfer")
    dec = s.sites[1]
    await until(lambda: dec.engine.stats.hist("nixl_xfer").count >= 1)
    body = await scrape(dec.base_url)
    nixl = (DATA / "vllm-nixl-SYNTHETIC-from-nixl_connector-py.txt").read_text()
    real = vllm_real()  # the 0.33.0 render and the --enable-mfu-metrics counters
    _compare(body, real + nixl, min_families=70)
    assert set(fshape(body)) - set(fshape(real)) == set(fshape(nixl))
