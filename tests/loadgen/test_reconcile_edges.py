"""Edges of the reconciliation: the allowance for tokens still owed to requests cut off, and
the wait for the server's counters to settle (read through a stand-in ``read_counters`` and
a recorded sleep: no server, no clock)."""

from __future__ import annotations

import pytest

from llmtop.loadgen import reconcile
from llmtop.loadgen.reconcile import Preflight, Tally, settled_counters


class _Res:
    def __init__(self, tokens: int, error: str | None = None) -> None:
        self.tokens = self.n_content = tokens
        self.error = error


def _tally() -> Tally:
    t = Tally()
    t.done(_Res(10), 10)            # finished: 10 of 10
    t.cancelled(_Res(3), 10)        # cut off after 3: 7 still owed
    t.done(_Res(2, "stream_error"), 10.4)  # failed after 2: ceil(10.4) - 2 = 9 owed
    return t


@pytest.mark.parametrize("server, ok", [
    (15, True),        # exactly what was received (10 + 3 + 2)
    (15 + 16, True),   # plus everything still owed (7 + 9)
    (15 + 17, False),  # one token more than could have been owed
    (14, False),       # less than received
])
def test_the_server_may_have_generated_what_was_still_owed_and_no_more(server, ok):
    t = _tally()
    assert t.owed == 16
    t.server = server
    rec = t.to_json(3, 3)
    assert rec["ok"] is ok, rec
    if not ok:
        assert "at most 16 more were owed" in rec["warnings"][0]


def test_a_failed_preflight_request_may_owe_its_one_token():
    t = _tally()
    t.preflight = Preflight(requests=3, ok=2, output_tokens=2)
    t.server = 15 + 2 + 16 + 1  # run + preflight + owed by the run + 1 for the failed probe
    assert t.to_json(3, 3)["ok"] is True
    t.server += 1
    assert t.to_json(3, 3)["ok"] is False


class _Counters:
    """The server's counters as read, one value per read; the last repeats."""

    def __init__(self, values: list[dict | None]) -> None:
        self.values = values
        self.reads = 0

    async def __call__(self, *_a, **_k):
        v = self.values[min(self.reads, len(self.values) - 1)]
        self.reads += 1
        return v


@pytest.fixture
def sleeps(monkeypatch):
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    monkeypatch.setattr(reconcile.asyncio, "sleep", sleep)
    return slept


async def test_the_counters_are_read_again_until_they_have_counted_what_was_received(
        monkeypatch, sleeps):
    before = {"tokens": 100.0, "requests": 10.0}
    reads = _Counters([{"tokens": 150.0, "requests": 14.0},   # tokens still behind
                       {"tokens": 164.0, "requests": 14.0},   # requests still behind
                       {"tokens": 164.0, "requests": 15.0},   # settled
                       {"tokens": 999.0, "requests": 99.0}])  # never read
    monkeypatch.setattr(reconcile, "read_counters", reads)
    got = await settled_counters("http://127.0.0.1:1/v1/completions", before, 64, 5)
    assert got == {"tokens": 164.0, "requests": 15.0}
    assert reads.reads == 3 and sleeps == [0.25, 0.25]


async def test_the_wait_ends_after_settle_s_with_what_the_server_said_last(monkeypatch, sleeps):
    reads = _Counters([{"tokens": 110.0, "requests": None}])  # never catches up
    monkeypatch.setattr(reconcile, "read_counters", reads)
    got = await settled_counters("http://x:1", {"tokens": 100.0, "requests": None}, 64, 5,
                                 settle_s=1.0)
    assert got == {"tokens": 110.0, "requests": None}
    assert sleeps == [0.25] * 4 and reads.reads == 5
    t = Tally()
    t.done(_Res(64), 64)
    t.server_delta({"tokens": 100.0, "requests": None}, got)
    assert t.server == 10 and t.server_requests is None
    assert t.to_json(1, 1)["ok"] is False  # the counter never counted what was received


async def test_no_counters_means_no_wait(monkeypatch, sleeps):
    reads = _Counters([None])
    monkeypatch.setattr(reconcile, "read_counters", reads)
    assert await settled_counters("http://x:1", {"tokens": 1.0}, 64, 5) is None
    assert sleeps == [] and reads.reads == 1


def test_a_counter_reset_is_unknown_never_negative():
    t = Tally()
    t.server_delta({"tokens": 500.0, "requests": 50.0}, {"tokens": 20.0, "requests": 60.0})
    assert t.server is None and t.server_requests == 10
