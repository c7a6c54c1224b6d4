"""``llmtop --once`` asks a stuck engine's ``/health`` and says what it answered, in the
fast tier: a vLLM stood in for on 127.0.0.1 whose metrics hold requests and make no token
(the same counters at every scrape), on a clock sped up (20x) so the stall passes in a second."""

from __future__ import annotations

import io
import json

import pytest

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.diagnose.thresholds import STUCK_IDLE_S
from llmtop.once import run_once
from tests.conftest import fixture_text
from tests.loopback import serve

METRICS = fixture_text("vllm-real-cpu-v0.32.0-under-load.txt")  # 8 running, 22 waiting


@pytest.mark.parametrize(("answer", "said"), [
    (200, "/health answers 200: the scheduler admits nothing"),
    (503, "/health answers 503 while its metrics endpoint answers: the engine is unhealthy"),
])
def test_once_asks_a_stuck_engines_health_and_says_what_it_answered(monkeypatch, answer,
                                                                     said):
    monkeypatch.setenv(clock.ENV, clock.env_value(20.0))
    routes = {"/metrics": lambda _n: (200, "text/plain; version=0.0.4", METRICS),
              "/health": lambda _n: (answer, "text/plain", "")}
    with serve(routes) as (port, hits):
        # interval 30 s: a row is stale only after 90 clock seconds (4.5 s of real delay)
        config = Config(targets=(Target(name="stuck", base_url=f"http://127.0.0.1:{port}",
                                        engine="vllm"),), interval_s=30.0)
        out, err = io.StringIO(), io.StringIO()
        rc = run_once(config, window_s=STUCK_IDLE_S + 5, as_json=True, out=out, err=err)
    assert rc == 0, err.getvalue()
    doc = json.loads(out.getvalue())
    assert hits.get("/health") == 1  # asked once, after the window showed the stall
    assert [e["health_status"] for e in doc["engines"]] == [answer]
    found = [f for f in doc["diagnosis"] if f["rule"] == "stuck"]
    assert len(found) == 1 and said in found[0]["summary"], doc["engines"][0]["error"]
    assert {e["signal"]: e["value"] for e in found[0]["evidence"]}["health"] == answer
