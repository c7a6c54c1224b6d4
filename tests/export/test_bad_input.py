"""Bad input shows as state series, never a gap or a traceback; a hanging target does not
stop ``/metrics`` from answering."""

from __future__ import annotations

import asyncio
import time

import httpx

from llmtop.config import Config, Target
from llmtop.export.run import publish_direct, run
from llmtop.export.server import MetricsServer
from llmtop.model import STATES
from tests.conftest import fixture_text
from tests.export.scripted import exporter_monitor, raw
from tests.export.test_vs_once import samples
from tests.monitor_fakes import FakeScraperBase

A = Target(name="vllm@127.0.0.1:1", base_url="http://127.0.0.1:1", engine="vllm",
           host="127.0.0.1", port=1)
BODY_A = fixture_text("edge-vllm-counter-reset-a.txt")
BODY_B = fixture_text("edge-vllm-counter-reset-b.txt")  # the same vLLM after a restart
HTML = "<!doctype html><html><body>login</body></html>"


def _states(got: dict) -> dict[str, tuple[float, str, frozenset]]:
    """target -> (up, the state at 1, the labels of up) from one answer."""
    out = {}
    for (name, labels), v in got.items():
        if name == "llmtop_engine_up":
            d = dict(labels)
            st = [dict(lb)["state"] for (n, lb), x in got.items()
                  if n == "llmtop_engine_state" and x == 1.0
                  and dict(lb)["target"] == d["target"] and dict(lb).get("model") == d.get("model")]
            assert len(st) == 1, st
            out[d["target"]] = (v, st[0], labels)
    return out


def test_down_garbage_restart_are_states():
    config = Config(targets=(A,), discover=False, interval_s=1.0)
    steps = [("ok", BODY_A, "ok"), ("ok", BODY_A, "ok"), ("down", None, "down"),
             ("ok", HTML, "bad_payload"), ("ok", "\x00\x01 ::: {{ 12", "bad_payload"),
             ("ok", BODY_B, "restarted"), ("http_error", None, "http_error")]
    script = {A.name: [raw(A, 100.0 + i, body, status,
                           None if status == "ok" else f"{status} for the test")
                       for i, (status, body, _) in enumerate(steps)]}

    async def go() -> None:
        mon, state = exporter_monitor(config, script)
        labels = None
        try:
            for i, (status, _, want) in enumerate(steps):
                t0 = time.monotonic()
                snap = await mon.tick()
                publish_direct(state, mon, snap, 10.0, t0)
                got = samples(state.render().decode())
                up, st, lab = _states(got)[A.name]
                assert st == want, (i, st, want)
                assert up == (1.0 if want in ("ok", "restarted") else 0.0)
                assert dict(lab).get("model"), lab  # the model it had, even while down
                if labels is not None:
                    assert lab == labels, (i, lab, labels)  # the same series throughout
                labels = lab
                if want not in ("ok", "restarted"):  # no stale numbers as if fresh
                    assert not any(n == "llmtop_engine_running" for n, _ in got)
                assert sum(1 for n, lb in got if n == "llmtop_engine_state"
                           and dict(lb)["target"] == A.name) == len(STATES)
                errs = {dict(lb)["state"]: v for (n, lb), v in got.items()
                        if n == "llmtop_scrape_errors_total"}
                if status != "ok":
                    assert errs[status] >= 1
        finally:
            await mon.aclose()

    asyncio.run(go())


class _Live(FakeScraperBase):
    """A target that answers at once (real times), and one that never answers."""

    def __init__(self, hang: Target) -> None:
        self.hang = hang

    async def scrape(self, target: Target):
        if target.name == self.hang.name:
            await asyncio.Event().wait()
        return raw(target, time.monotonic(), BODY_A)

    async def identify(self, target: Target) -> dict:
        return {"host": target.host}


def test_hanging_target_keeps_serving():
    from llmtop.export.run import direct_store
    from llmtop.export.state import ExportState
    from llmtop.monitor import Monitor

    hang = Target(name="sglang@127.0.0.1:2", base_url="http://127.0.0.1:2", engine="sglang",
                  host="127.0.0.1", port=2)
    config = Config(targets=(A, hang), discover=False, interval_s=0.2)
    state = ExportState("direct", process_metrics=False)
    server = MetricsServer(state.render, "127.0.0.1:0")

    async def go() -> list[dict]:
        mon = Monitor(config, scraper=_Live(hang), store=direct_store(config),
                      sink=state.observe, tick_timeout_s=0.1)
        stop = asyncio.Event()
        answers = []

        async def refresh() -> None:
            t0 = time.monotonic()
            publish_direct(state, mon, await mon.tick(), 10.0, t0)

        async def scrape_it() -> None:
            async with httpx.AsyncClient() as c:
                for _ in range(12):
                    await asyncio.sleep(0.25)
                    r = await c.get(server.url, timeout=2)
                    assert r.status_code == 200
                    answers.append(_states(samples(r.text)))
            stop.set()

        try:
            await asyncio.gather(run(refresh, 0.2, stop, state=state), scrape_it())
        finally:
            await mon.aclose()
        return answers

    try:
        answers = asyncio.run(go())
    finally:
        server.close()
    last = answers[-1]
    assert last[A.name][:2] == (1.0, "ok")
    assert last[hang.name][:2] == (0.0, "stale")  # hangs: stale, with its series all along
    assert all(hang.name in a for a in answers)
