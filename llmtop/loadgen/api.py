"""The probe for other layers (CLI, TUI): ``start_probe(options) -> ProbeHandle``.

The load runs in a separate process (``worker.py``), so neither the caller's event loop nor
its GIL ever limits it. ``ProbeHandle.poll()`` never blocks; events are dicts with a
``type``: ``preparing``, ``prepared``, ``step_started``, ``progress`` (every ~0.5 s),
``step_done`` (``step``: the step dict), ``error`` (``message``) and, always last,
``finished`` (``report``: the report dict, or None when the probe could not start).
Shapes are documented in ``docs/probe.md``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from llmtop import children
from llmtop.loadgen.options import ProbeOptions

__all__ = ["ProbeEvent", "ProbeHandle", "ProbeOptions", "start_probe"]

ProbeEvent = dict[str, Any]


class ProbeHandle:
    """A running (or finished) probe."""

    def __init__(self, child: children.Child, conn: Any) -> None:
        self._child = child
        self._proc = child.proc
        self._conn = conn
        self._result: dict[str, Any] | None = None
        self._finished = False
        self._stop_sent = False
        self.steps: list[dict[str, Any]] = []
        """Every ``step_done`` step seen so far (a partial report can be built from these)."""
        self.errors: list[str] = []

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def pid(self) -> int:
        """The worker process id (e.g. to pin it to a core in benchmarks)."""
        return int(self._proc.pid)

    def poll(self) -> list[ProbeEvent]:
        """Events that arrived since the last call; never blocks."""
        events: list[ProbeEvent] = []
        if self._conn is None:
            return events
        try:
            while self._conn.poll():
                ev = self._conn.recv()
                events.append(ev)
                kind = ev.get("type")
                if kind == "step_done":
                    self.steps.append(ev["step"])
                elif kind == "error":
                    self.errors.append(ev.get("message", ""))
                elif kind == "finished":
                    self._result = ev.get("report")
                    self._finished = True
        except (EOFError, OSError):
            self._on_dead(events)
        if not self._finished and self._proc.poll() is not None and not self._conn.poll():
            self._on_dead(events)
        return events

    def _on_dead(self, events: list[ProbeEvent]) -> None:
        if not self._finished:
            self._finished = True
            msg = "probe process ended without a report"
            self.errors.append(msg)
            events.append({"type": "error", "t": time.time(), "message": msg})
            events.append({"type": "finished", "t": time.time(), "report": None})
        self._close_conn()
        if self._proc.poll() is not None:
            self._child.stop(timeout_s=1.0)  # the worker is gone: end its group, forget it

    def _close_conn(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def stop(self) -> None:
        """Ask the probe to stop now (in-flight requests are cancelled, the report is built)."""
        if self._stop_sent or self._finished or self._conn is None:
            return
        self._stop_sent = True
        try:
            self._conn.send({"cmd": "stop"})
        except (OSError, BrokenPipeError):
            pass

    def wait(self, timeout: float | None = None) -> list[ProbeEvent]:
        """Block until finished (or ``timeout``); returns the events seen meanwhile."""
        end = None if timeout is None else time.monotonic() + timeout
        events: list[ProbeEvent] = []
        while not self._finished:
            if end is not None and time.monotonic() >= end:
                break
            if self._conn is not None:
                self._conn.poll(0.1 if end is None else max(0.0, min(0.1, end - time.monotonic())))
            events.extend(self.poll())
        if self._finished:
            try:  # the worker leaves on its own once the report is sent
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            self._child.stop(timeout_s=5.0)
        return events

    def result(self) -> dict[str, Any] | None:
        """The final report once ``finished`` arrived, else None."""
        return self._result

    def kill(self) -> None:
        """Last resort: terminate the process (no report)."""
        self._child.stop(timeout_s=5.0)
        self._close_conn()
        self._finished = True


def start_probe(options: ProbeOptions) -> ProbeHandle:
    """Validate ``options`` and start the probe process.

    The worker is a fresh interpreter (``python -m llmtop.loadgen.worker FD``) started with
    :func:`llmtop.children.spawn`: in its own session, so the terminal's Ctrl-C reaches only
    the caller, which then calls ``stop()``; and ended with llmtop however llmtop ends.
    The options (API key included) travel over the socket, never on the command line.
    """
    options.validate()
    parent_sock, child_sock = socket.socketpair()
    fd = child_sock.fileno()
    quiet = not os.environ.get("LLMTOP_DEBUG")
    try:
        child = children.spawn([sys.executable, "-m", "llmtop.loadgen.worker", str(fd)],
                               pass_fds=(fd,), inherit_output=not quiet)
    except BaseException:
        parent_sock.close()
        raise
    finally:
        child_sock.close()
    conn = Connection(parent_sock.detach())
    conn.send(options.to_dict())
    return ProbeHandle(child, conn)
