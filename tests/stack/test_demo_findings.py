"""Each stack finding fires on its demo scenario and not on the calm stack, read as a user
reads it: ``--once --json`` given the demo router's URL alone (its backends come with it).

The demo and llmtop share a clock ``SCALE`` times as fast as the wall clock
(``llmtop.clock``), so a scenario's minutes pass in seconds; durations here are in its
seconds. Each waits for its scenario's anomaly in the simulation first (not for llmtop)."""

from __future__ import annotations

import io
import json

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.once import _run
from tests.demo.conftest import demo_factory  # noqa: F401  (the fixture)
from tests.demo.test_stack import until

SCALE = 12.0

pytestmark = pytest.mark.ci_step


@pytest.fixture
def stack(demo_factory, monkeypatch):  # noqa: F811
    monkeypatch.setenv(clock.ENV, clock.env_value(SCALE))

    async def make(scenario: str, baseline_s: float = 0.0):
        return await demo_factory(scenario=scenario, baseline_s=baseline_s, background=True)

    return make


async def _once(server, window_s: float) -> dict:
    """``llmtop --once --json ROUTER_URL`` over ``window_s`` clock seconds."""
    url = server.stack.base_url
    port = int(url.rsplit(":", 1)[1])
    t = Target(name=f"vllm-router@127.0.0.1:{port}", base_url=url, host="127.0.0.1",
               port=port)
    out, err = io.StringIO(), io.StringIO()
    rc = await _run(Config(targets=(t,), discover=False), window_s=window_s, as_json=True,
                    demo=None, monitor=None, out=out, err=err)
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


def _rules(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in doc["diagnosis"]:
        if f["severity"] in ("warn", "critical"):
            out.setdefault(f["rule"], []).append(f)
    return out


STACK_RULES = ("routing", "pd_balance", "kv_transfer", "stuck")


async def test_calm_stack_gets_no_stack_finding(stack):
    s = await stack("stack")
    await until(lambda: all(x.engine.stats.c["generation_tokens"] > 0 for x in s.sites))
    doc = await _once(s, 6.0)
    [router] = doc["routers"]
    assert len(router["backends"]) == 2 and len(doc["engines"]) == 2
    assert not set(_rules(doc)) & set(STACK_RULES), _rules(doc)


async def test_routing_names_the_one_seat_backend(stack):
    s = await stack("routing", baseline_s=1.0)
    one, _eight = s.sites
    await until(lambda: len(one.engine.waiting) >= 4)
    doc = await _once(s, 6.0)
    found = _rules(doc).get("routing")
    assert found, doc["diagnosis"]
    assert any(str(one.port) in f["target"] or str(one.port) in f["summary"] for f in found)


async def test_routing_names_the_backend_down(stack):
    s = await stack("routing-down", baseline_s=1.0)
    r = s.stack.router
    await until(lambda: not r.backends[1].healthy and r.backends[1].breaker_open)
    doc = await _once(s, 4.0)
    assert "routing" in _rules(doc), doc["diagnosis"]


async def test_pd_balance_names_the_saturated_prefill_pool(stack):
    s = await stack("pd-balance", baseline_s=0.5)
    pre = s.sites[0]
    await until(lambda: len(pre.engine.waiting) >= 10)
    doc = await _once(s, 6.0)
    assert "pd_balance" in _rules(doc), doc["diagnosis"]
    roles = {e["target"]: e["role"] for e in doc["engines"]}
    assert sorted(roles.values()) == ["decode", "decode", "prefill"]


async def test_kv_transfer_names_the_slow_failing_link(stack):
    s = await stack("kv-transfer", baseline_s=0.0)
    st = s.sites[1].engine.stats
    await until(lambda: st.c["nixl_failed"] >= 1 and st.hist("nixl_xfer").count >= 5)
    doc = await _once(s, 8.0)
    assert "kv_transfer" in _rules(doc), doc["diagnosis"]


async def test_stuck_names_the_stalled_engine_before_any_latency(stack):
    s = await stack("stuck", baseline_s=1.0)
    _ok, stuck = s.sites
    await until(lambda: stuck.engine.stalled and len(stuck.engine.waiting) >= 1)
    doc = await _once(s, 20.0)
    found = _rules(doc).get("stuck")
    assert found, doc["diagnosis"]
    assert all(str(stuck.port) in f["target"] for f in found)
    # the demo's stalled vLLM answers /health 200 (empty body, as vLLM does): the stall
    # a health check misses, named as such; the moving engine was never asked
    assert all("/health answers 200" in f["summary"] for f in found), found
    health = {e["target"]: e["health_status"] for e in doc["engines"]}
    assert [v for k, v in health.items() if str(stuck.port) in k] == [200]
    assert [v for k, v in health.items() if str(stuck.port) not in k] == [None]
