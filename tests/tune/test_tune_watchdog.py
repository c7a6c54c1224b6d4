"""The trial watchdog (``tune.trial._Watchdog``) on an injected clock: a level stopped early
when preemptions climb with a queue, a trial failed when the engine's metrics stop
answering or its token counter freezes while requests run, and the healthy cases that must
not trip it. Each tick of the fake probe handle advances the clock by one second and sets
what the engine's metrics say then. No server, no sleeping."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from llmtop.loadgen.bakeoff import StopFlag
from llmtop.tune import trial as trial_mod
from llmtop.tune.trial import CLIMB_TICKS, HUNG_S, _Watchdog


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class Watch:
    latest: dict = {}


class Handle:
    """A probe that runs for ``ticks`` ticks unless stopped; ``metrics(i, now)`` is what the
    engine's metrics say at tick ``i`` (None: not read this tick)."""

    def __init__(self, clock: Clock, watch: Watch, metrics: Callable[[int, float], dict | None],
                 ticks: int = 60) -> None:
        self.clock, self.watch, self.metrics, self.ticks = clock, watch, metrics, ticks
        self.i = 0
        self.stopped_at: int | None = None
        self.killed_at: int | None = None

    @property
    def finished(self) -> bool:
        return self.i >= self.ticks or self.killed_at is not None or (
            self.stopped_at is not None and self.i > self.stopped_at)

    def wait(self, _s: float) -> list:
        self.i += 1
        self.clock.t += 1.0
        m = self.metrics(self.i, self.clock.t)
        if m is not None:
            self.watch.latest = {"t": self.clock.t, **m}
        return []

    def stop(self) -> None:
        self.stopped_at = self.i

    def kill(self) -> None:
        self.killed_at = self.i


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(trial_mod.time, "monotonic", c)
    return c


def _drive(clock: Clock, metrics, ticks: int = 60, deadline: float | None = None,
           handle: type[Handle] | None = None) -> tuple[_Watchdog, Handle]:
    dog = _Watchdog(None, deadline, ttft_slo=None)
    watch = Watch()
    dog.watch = watch  # type: ignore[assignment]
    h = (handle or Handle)(clock, watch, metrics, ticks)
    dog.drive(None, None, h, StopFlag())
    return dog, h


def _busy(i: int, **kw) -> dict:
    base = {"generation_tokens": 100.0 * i, "running": 4.0, "waiting": 2.0, "preemptions": 0.0}
    base.update(kw)
    return base


def test_climbing_preemptions_with_a_queue_stop_the_level_early(clock):
    dog, h = _drive(clock, lambda i, _t: _busy(i, preemptions=float(max(0, i - 5))))
    assert dog.early is not None and "preemptions climbed" in dog.early
    assert f"{CLIMB_TICKS} ticks in a row" in dog.early
    # rising from tick 6 on: the third rise in a row is seen at tick 8
    assert h.stopped_at == 8 and dog.dead is None and h.killed_at is None


@pytest.mark.parametrize("case", ["no-queue", "not-in-a-row", "flat"])
def test_preemptions_that_do_not_climb_with_a_queue_never_stop_it(clock, case):
    def metrics(i, _t):
        if case == "no-queue":
            return _busy(i, preemptions=float(i), waiting=0.0)
        if case == "not-in-a-row":  # rises twice, rests, rises twice...
            return _busy(i, preemptions=float(i - i // 3))
        return _busy(i, preemptions=5.0)
    dog, h = _drive(clock, metrics, ticks=30)
    assert dog.early is None and dog.dead is None and h.stopped_at is None


def test_metrics_that_stop_answering_fail_the_trial_as_hung(clock):
    # answered for 5 ticks, then never again
    dog, h = _drive(clock, lambda i, _t: _busy(i) if i <= 5 else None)
    assert dog.dead is not None and "did not answer" in dog.dead and "hung" in dog.dead
    # the last answer was at tick 5; more than HUNG_S later is tick 5 + HUNG_S + 1
    assert h.killed_at == 5 + int(HUNG_S) + 1


def test_a_token_counter_frozen_while_requests_run_fails_the_trial_as_hung(clock):
    dog, h = _drive(clock, lambda i, _t: _busy(min(i, 4)))  # no new token after tick 4
    assert dog.dead is not None and "generated no token" in dog.dead
    assert "4 running and 2 waiting" in dog.dead
    assert h.killed_at == 4 + int(HUNG_S) + 1


def test_a_frozen_counter_with_nothing_running_is_idle_not_hung(clock):
    dog, h = _drive(clock, lambda i, _t: _busy(min(i, 4), running=0.0, waiting=0.0),
                    ticks=40)
    assert dog.dead is None and h.killed_at is None and dog.early is None


def test_slow_but_answering_metrics_are_not_hung(clock):
    # an answer every HUNG_S - 1 ticks, with tokens moving: never hung
    step = int(HUNG_S) - 1
    dog, h = _drive(clock, lambda i, _t: _busy(i) if i % step == 0 else None, ticks=40)
    assert dog.dead is None and h.killed_at is None


class Deaf(Handle):
    """A probe that does not end when asked to stop (its requests hang)."""

    @property
    def finished(self) -> bool:
        return self.i >= self.ticks or self.killed_at is not None


def test_the_budget_stops_the_level_at_once_and_kills_a_deaf_probe_10_s_later(clock):
    deadline = clock.t + 5.5  # passed at tick 6
    dog, h = _drive(clock, lambda i, _t: _busy(i), deadline=deadline)
    assert dog.budget is True and h.stopped_at == 6 and h.killed_at is None
    dog, h = _drive(clock, lambda i, _t: _busy(i), deadline=clock.t + 5.5, handle=Deaf)
    assert dog.budget is True and h.stopped_at == 6
    assert h.killed_at == 6 + 11  # more than 10 s after the stop
