"""``llmtop.clock``: the real clock by default; ``LLMTOP_TIME_SCALE=K@E`` runs it K times as
fast from E on, the same in every process given the value."""

from __future__ import annotations

import asyncio
import time

from llmtop import clock


def test_unset_is_the_real_clock(monkeypatch):
    monkeypatch.delenv(clock.ENV, raising=False)
    assert clock.scale() == 1.0
    assert abs(clock.time() - time.time()) < 1.0
    assert abs(clock.monotonic() - time.monotonic()) < 1.0


def test_scaled_time_runs_k_times_as_fast_from_the_epoch(monkeypatch):
    epoch = time.time() - 10.0
    monkeypatch.setenv(clock.ENV, clock.env_value(4, epoch))
    assert clock.scale() == 4.0
    assert abs(clock.time() - (epoch + 40.0)) < 1.0  # 10 real seconds since E: 40 clock seconds
    assert abs(clock.monotonic() - 4 * time.monotonic()) < 1.0


def test_two_readers_of_one_value_agree(monkeypatch):
    """What a demo child and the monitor compute from the same value: the same time."""
    value = clock.env_value(3)
    k, _, e = value.partition("@")
    monkeypatch.setenv(clock.ENV, value)
    expect = float(e) + (time.time() - float(e)) * float(k)
    assert abs(clock.time() - expect) < 0.5


def test_sleep_waits_a_kth_of_the_seconds(monkeypatch):
    monkeypatch.setenv(clock.ENV, clock.env_value(50))
    t0 = time.monotonic()
    asyncio.run(clock.sleep(5.0))  # 0.1 real seconds
    assert time.monotonic() - t0 < 4.0  # not 5 s: bounded generously for a loaded machine


def test_bad_values_mean_the_real_clock(monkeypatch):
    for bad in ("fast", "0", "-2", "2@soon"):
        monkeypatch.setenv(clock.ENV, bad)
        assert clock.scale() == 1.0, bad


async def test_a_demo_scenario_runs_on_the_scaled_clock(monkeypatch):
    """The demo's baseline timer and its engines' start times read the clock: a 20 s
    baseline at K=20 ends after about a real second (a demo on the real clock: 20 s)."""
    from llmtop.demo.server import DemoServer

    monkeypatch.setenv(clock.ENV, clock.env_value(20))
    server = DemoServer(["vllm"], scenario="decode-slowdown", background=True, baseline_s=20.0)
    await server.start()
    try:
        for _ in range(300):  # 15 real seconds at most
            if server.anomaly_started is not None:
                break
            await asyncio.sleep(0.05)
        assert server.anomaly_started is not None, "the baseline did not end within 15 real s"
        engine = server.sites[0].engine
        assert server.anomaly_started - engine.start_time >= 19.0  # both in clock seconds
    finally:
        await server.stop()
