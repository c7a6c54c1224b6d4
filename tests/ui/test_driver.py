"""CalmLinuxDriver: keys and a lone Esc still arrive, the input thread sleeps while idle,
stops at once when told to, and does not spin when its input closes."""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import threading
import time

import pytest
from textual import events

from llmtop.ui import driver as drv
from llmtop.ui.driver import CalmLinuxDriver, WakingEvent, input_wait


class CountingSelector(selectors.SelectSelector):
    calls = 0

    def select(self, timeout=None):
        CountingSelector.calls += 1
        return super().select(timeout)


class Recorder(CalmLinuxDriver):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.got: list = []

    def process_message(self, message) -> None:
        self.got.append(message)


@pytest.fixture
async def running(monkeypatch):
    """A driver reading from a pipe in its own input thread; yields (driver, write fd)."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    monkeypatch.setattr(drv.selectors, "SelectSelector", CountingSelector)
    CountingSelector.calls = 0
    d = Recorder(object())
    r, w = os.pipe()
    d.fileno = r
    # the pipe's fds still open; a test that closes one discards it here. Closing it again
    # would close whatever the process opened on that number since (a socket of another
    # test's server: EBADF in its thread later)
    d.open_fds = {r, w}
    t = threading.Thread(target=d.run_input_thread, daemon=True)
    t.start()
    try:
        yield d, w, t
    finally:
        d.exit_event.set()
        t.join(2)
        for fd in d.open_fds:
            os.close(fd)
        d.close()
        for s, h in saved.items():
            signal.signal(s, h)


async def wait_for(pred, timeout=2.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return False


def keys(d) -> list[str]:
    return [m.key for m in d.got if isinstance(m, events.Key)]


async def test_keys_arrive_and_a_lone_escape_is_delivered_after_its_delay(running):
    d, w, _ = running
    os.write(w, b"q")
    assert await wait_for(lambda: keys(d) == ["q"])
    t0 = time.monotonic()
    os.write(w, b"\x1b")  # a lone Esc: the parser waits for more, then times out
    assert await wait_for(lambda: keys(d) == ["q", "escape"])
    assert time.monotonic() - t0 < 1.0


async def test_idle_thread_sleeps_and_exits_at_once(running):
    d, _, t = running
    await asyncio.sleep(0.6)
    assert CountingSelector.calls <= 2  # upstream polls every 0.1 s: ~6 here
    t0 = time.monotonic()
    d.exit_event.set()
    t.join(1.0)
    assert not t.is_alive() and time.monotonic() - t0 < 0.3


async def test_closed_input_does_not_spin(running):
    d, w, t = running
    os.close(w)
    d.open_fds.discard(w)
    await asyncio.sleep(0.1)
    n = CountingSelector.calls
    await asyncio.sleep(0.4)
    assert CountingSelector.calls - n <= 1 and t.is_alive()


def test_input_wait_follows_the_parser_deadline():
    class P:
        _timeout_time = None

    p = P()
    assert input_wait(p) is None
    p._timeout_time = drv.get_time() + 0.05
    assert 0.0 < input_wait(p) <= 0.05
    p._timeout_time = drv.get_time() - 1
    assert input_wait(p) == 0.0
    assert input_wait(object()) == drv.FALLBACK_WAIT_S  # no deadline attribute: poll


def test_the_real_parser_keeps_its_deadline_attribute():
    # input_wait reads XTermParser._timeout_time (textual is pinned); an upgrade that drops it
    # falls back to upstream's 0.1 s polling, and this test says so
    from textual._xterm_parser import XTermParser

    assert hasattr(XTermParser(), "_timeout_time")


def test_waking_event_writes_to_its_pipe():
    r, w = os.pipe()
    try:
        e = WakingEvent(w)
        e.set()
        assert e.is_set() and os.read(r, 10) == b"x"
    finally:
        os.close(r)
        os.close(w)


def test_app_uses_the_calm_driver_unless_textual_driver_is_set(monkeypatch):
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.fake import FakeSource

    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert LlmtopApp(FakeSource.demo("ok")).driver_class is CalmLinuxDriver
