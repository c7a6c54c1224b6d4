"""The routing demo as a new user meets it: the live monitor's diagnosis lists ``routing``
first and ``queueing`` second on the 1-seat backend, and the header's verdict (computed as
the TUI computes it, queue growth included) names both, root cause first, at the queue's
CRITICAL level, within 80 columns.

The in-process demo and the monitor share a clock ``SCALE`` times as fast as the wall clock
(``llmtop.clock``); durations are in its seconds."""

from __future__ import annotations

import re

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.diagnose.live import findings_of
from llmtop.monitor import Monitor
from llmtop.verdict import compute_verdict, growth_per_min, growth_points
from tests.demo.conftest import demo_factory  # noqa: F401  (the fixture)
from tests.demo.test_stack import until

SCALE = 12.0
INTERVAL_S = 2.0

pytestmark = pytest.mark.ci_step


async def test_the_header_names_routing_then_the_queue_it_causes(demo_factory, monkeypatch):  # noqa: F811
    monkeypatch.setenv(clock.ENV, clock.env_value(SCALE))
    s = await demo_factory(scenario="routing", baseline_s=1.0, background=True)
    one, _eight = s.sites
    await until(lambda: len(one.engine.waiting) >= 4)
    url = s.stack.base_url
    port = int(url.rsplit(":", 1)[1])
    router = Target(name=f"vllm-router@127.0.0.1:{port}", base_url=url, host="127.0.0.1",
                    port=port)
    mon = Monitor.from_config(Config(targets=(router,), discover=False, interval_s=INTERVAL_S))
    verdict = None
    try:
        t0 = clock.monotonic()
        while clock.monotonic() - t0 < 90.0:
            snap = await mon.tick()
            findings = [f for f in findings_of(mon.store) if str(one.port) in f.target]
            if [f.rule for f in findings][:2] == ["routing", "queueing"]:
                n = growth_points(INTERVAL_S)
                growth = {r.key: g for r in snap.engines
                          if (g := growth_per_min(mon.store.series(r.key, "waiting", n),
                                                  INTERVAL_S)) is not None}
                verdict = compute_verdict(snap, waiting_growth=growth,
                                          diagnosis=findings_of(mon.store))
                if verdict.text.startswith("CRITICAL"):
                    break
            await clock.sleep(INTERVAL_S)
    finally:
        await mon.aclose()
    assert verdict is not None, [(f.rule, f.target) for f in findings_of(mon.store)]
    # a backend the router named is its host:port until its first identity names the engine
    head = re.match(rf"CRITICAL \u2014 (vllm@)?:{one.port} routing \u2192 queueing",
                    verdict.text)
    assert head is not None, verdict.text
    assert len(head.group(0)) <= 80
    assert findings[0].explains[-1:] == ("queueing",) or "queueing" in findings[0].explains
