"""Side polls against engines and routers stood in for on 127.0.0.1, through the monitor's
public API (``Monitor(...).tick()``, its store's snapshot, a recording):

- an sglang-router answers ``/workers`` on its serving port only (its metrics port has
  none): the roles arrive, asked where they are;
- a llama-server's ``/slots`` answer carries the users' prompt and generated text: none of
  it reaches the store, the snapshot or a recording (the TUI's ``--record``); its numbers
  do.
"""

from __future__ import annotations

import asyncio
import json

from llmtop.config import Config, Target
from llmtop.model import RawScrape
from llmtop.monitor import Monitor
from llmtop.record.live import attach
from llmtop.record.reader import Recording
from tests.conftest import fixture_text
from tests.loopback import serve

PD = fixture_text("routers/real/sglang-router-pd.txt")
WORKERS = fixture_text("routers/real/sglang-router-pd-workers.json").split("\n", 1)[1]
A, B = "http://127.0.0.1:41235", "http://127.0.0.1:35871"  # prefill, decode in PD
REAL_A, REAL_B = "http://127.0.0.1:34417", "http://127.0.0.1:38201"  # in WORKERS

TEXT = "text/plain; version=0.0.4"
MAX_TICKS = 200
"""A hang guard: ticks (a short pause after each, for a side poll in flight to land) before
a test gives up waiting for what it expects."""


async def _tick_until(mon: Monitor, done) -> object:
    """Tick until ``done(snapshot)``: a side poll is fed at the first tick after it
    answered, so how many ticks that takes is not judged."""
    for _ in range(MAX_TICKS):
        snap = await mon.tick()
        if done(snap):
            return snap
        await asyncio.sleep(0.02)
    return snap


async def test_router_workers_are_asked_on_the_serving_port_not_the_metrics_port():
    answer = WORKERS.replace(REAL_A, A).replace(REAL_B, B)
    metrics = {"/metrics": lambda _n: (200, TEXT, PD)}  # /workers here: 404
    api = {"/workers": lambda _n: (200, "application/json", answer)}  # /metrics here: 404
    with serve(metrics) as (mport, mhits), serve(api) as (aport, ahits):
        router = Target(name="router", base_url=f"http://127.0.0.1:{mport}",
                        engine="sglang-router", api_url=f"http://127.0.0.1:{aport}")
        mon = Monitor(Config(targets=(router,)))
        try:
            snap = await _tick_until(mon, lambda s: any(
                b.role for r in s.routers for b in r.backends))
        finally:
            await mon.aclose()
    [r] = [r for r in snap.routers if r.target == "router"]
    assert {b.url: b.role for b in r.backends} == {A: "prefill", B: "decode"}
    assert ahits.get("/workers", 0) >= 1 and "/workers" not in mhits
    assert "/metrics" not in ahits


SECRET = "the-users-own-words-7f3c"


def _slots_answer() -> str:
    """The real llama-server's ``/slots`` (one slot busy), each slot with its prompt and
    generated text as llama-server adds them (``server_slot::to_json``)."""
    doc = json.loads(fixture_text("../spans/llamacpp-real-11434.0.0-slots.txt")
                     .split("\n", 1)[1])
    for i, s in enumerate(doc):
        s["prompt"] = f"{SECRET} prompt {i}"
        s["generated"] = f"{SECRET} generated {i}"
        s["params"]["generation_prompt"] = SECRET
    return json.dumps(doc)


async def test_slots_prompt_text_reaches_no_store_snapshot_or_recording(tmp_path):
    metrics = fixture_text("llamacpp-real-b0-sdist-11434.0.0-under-load.txt")
    slots = _slots_answer()
    assert SECRET in slots
    path = tmp_path / "r.llmtop"
    routes = {"/metrics": lambda _n: (200, TEXT, metrics),
              "/slots": lambda _n: (200, "application/json", slots)}
    with serve(routes) as (port, hits):
        config = Config(targets=(Target(name="llama", base_url=f"http://127.0.0.1:{port}",
                                        engine="llamacpp"),))
        mon = attach(Monitor(config), str(path), config)  # the TUI's --record
        try:
            snap = await _tick_until(mon, lambda s: bool(
                s.requests_window and s.requests_window.get("inflight")))
            doc = json.dumps(snap.to_json("host"))
            store = repr(mon.store.requests.inflight) + repr(mon.store.snapshot(10.0))
        finally:
            await mon.aclose()
    assert hits.get("/slots", 0) >= 1
    [busy] = snap.requests_window["inflight"]  # the numbers arrive: slot 1, 219 tokens
    assert (busy["slot"], busy["prompt_tokens"]) == (1, 219)
    assert SECRET not in doc and SECRET not in store
    recorded = [x for x in Recording.open(path).items() if isinstance(x, RawScrape)]
    side = [x for x in recorded if x.url.endswith("/slots")]
    assert side and all('"n_prompt_tokens":219' in (x.body or "") for x in side[-1:])
    assert [x.url for x in recorded if SECRET in (x.body or "")] == []
