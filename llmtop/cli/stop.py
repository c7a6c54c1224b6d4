"""An asyncio event set by SIGTERM or SIGINT: the long-running commands' clean stop."""

from __future__ import annotations

import asyncio
import signal


def stop_event() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set (on the running loop, where it can take them)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    return stop
