"""Textual's Linux driver with an input thread that sleeps until there is something to do.

Textual's ``LinuxDriver`` input thread wakes every 0.1 s to check its exit flag and the key
parser's escape timeout: 10 wake-ups a second, ~0.1 % of a core on an idle dashboard
(``benchmarks/tui_cost.py --threads``). ``CalmLinuxDriver`` waits on stdin and a wake-up pipe
instead: it wakes for input, when a lone ``Esc`` must be delivered (the parser's own deadline),
or when the exit flag is set (setting it writes to the pipe). Keys, mouse and resize messages
go through the same parser and ``process_message`` as upstream.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder
from threading import Event
from typing import Any

from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

__all__ = ["CalmLinuxDriver", "WakingEvent", "input_wait"]

FALLBACK_WAIT_S = 0.1
"""Upstream's poll period, used when the parser's deadline cannot be read."""

_MISSING = object()


class WakingEvent(Event):
    """A ``threading.Event`` whose ``set()`` also writes one byte to a pipe, so a thread
    blocked in ``select`` on that pipe sees it at once."""

    def __init__(self, wake_fd: int) -> None:
        super().__init__()
        self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        try:
            os.write(self._wake_fd, b"x")
        except OSError:  # the pipe is full (already woken) or closed
            pass


def input_wait(parser: Any) -> float | None:
    """Seconds the input thread may sleep: until the parser's escape deadline, or None
    (until input or a wake-up) when no deadline is pending."""
    deadline = getattr(parser, "_timeout_time", _MISSING)
    if deadline is _MISSING:  # a Textual without this attribute: poll as upstream does
        return FALLBACK_WAIT_S
    if deadline is None:
        return None
    return max(0.0, min(FALLBACK_WAIT_S, deadline - get_time()))


class CalmLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread blocks instead of polling every 0.1 s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)
        self.exit_event = WakingEvent(self._wake_w)

    def close(self) -> None:
        super().close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def run_input_thread(self) -> None:
        """Wait for input, the parser's escape deadline or the exit flag; dispatch events."""
        selector = selectors.SelectSelector()
        fileno, wake = self.fileno, self._wake_r
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def handle(events: list[tuple[selectors.SelectorKey, int]]) -> None:
            ready = [key.fd for key, mask in events if mask & selectors.EVENT_READ]
            if wake in ready:
                try:
                    os.read(wake, 512)
                except OSError:
                    pass
            if fileno in ready:
                raw = os.read(fileno, 4096)
                if not raw:  # end of input (a closed pipe): stop watching it, do not spin
                    selector.unregister(fileno)
                else:
                    for event in parser.feed(decode(raw)):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                handle(selector.select(input_wait(parser)))
            for event in parser.tick():
                self.process_message(event)
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except Exception:  # EOF or a half sequence at exit: nothing left to deliver
                pass
