"""A log read from a child process's output: ``journalctl -o json --follow``, a user's command.

- ``ChildTail(argv, what)``: starts ``argv`` on the first ``read`` (through
  ``llmtop.children.spawn``: its own process group, ended when llmtop ends however it ends),
  its stdout and stderr into a pipe read without blocking; ``read()`` answers the complete
  lines since the last call (``tail.TailRead``), ``close()`` ends the child and reaps it (no
  zombie).
- A child that cannot be started, or that ends, is an ``error``; it is started again with
  back-off (``tail.retry_after``) with ``again`` as its command line (the journal: only
  what is new).
- ``journal_argv(unit, pid, lines)``: the journal's command line for a unit (else a pid).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from llmtop import children, clock
from llmtop.errors import LlmtopError
from llmtop.sources.logs.tail import MAX_LINE, READ_BUDGET, LineSplitter, TailRead, retry_after

__all__ = ["ChildTail", "journal_argv"]

_CHUNK = 64 * 1024


def journal_argv(unit: str | None, pid: int | None, lines: int, *,
                 journalctl: str = "journalctl") -> list[str]:
    """``journalctl -o json --follow`` for ``unit`` (``_SYSTEMD_UNIT``), else ``_PID``,
    starting with its last ``lines`` entries."""
    match = [f"_SYSTEMD_UNIT={unit}"] if unit else [f"_PID={pid}"] if pid is not None else []
    return [journalctl, "-o", "json", "--follow", "--no-pager", "--lines", str(lines), *match]


class ChildTail:
    """One child process whose output is a log (see the module docstring)."""

    def __init__(self, argv: Sequence[str], what: str, *, again: Sequence[str] | None = None,
                 spawn: Callable[..., children.Child] = children.spawn,
                 max_line: int = MAX_LINE, budget: int = READ_BUDGET) -> None:
        self.argv = list(argv)
        self.again = list(again) if again is not None else self.argv
        self.what = what
        self._spawn = spawn
        self.budget = budget
        self.child: children.Child | None = None
        self._fd: int | None = None
        self._lines = LineSplitter(max_line)
        self.failures = 0
        self.next_try = 0.0
        self._error: str | None = None
        self._started = False

    def read(self, limit: int | None = None) -> TailRead:
        """The complete lines the child wrote since the last call; past ``limit`` lines, only
        those with a mark of trouble (``tail.LineSplitter``)."""
        out = TailRead()
        self._lines.allow, self._lines.skimmed = limit, 0
        try:
            self._read(out)
        finally:
            out.skimmed = self._lines.skimmed
        return out

    def _read(self, out: TailRead) -> TailRead:
        if self._fd is None:
            if clock.monotonic() < self.next_try:
                out.error = self._error
                return out
            if not self._start(out):
                return out
        assert self._fd is not None
        left = self.budget
        while left > 0:
            try:
                data = os.read(self._fd, min(_CHUNK, left))
            except BlockingIOError:
                return out
            except OSError as exc:
                data, out.error = b"", f"{self.what}: {exc.strerror or exc}"
            if not data:  # the child closed its output: it ended
                self._lines.flush(out.lines)
                status = self._end()
                self._failed(f"{self.what} ended (exit status {status})", out)
                return out
            left -= len(data)
            self._lines.feed(data, out.lines)
        return out

    def _start(self, out: TailRead) -> bool:
        argv = self.again if self._started else self.argv
        r, w = os.pipe()
        try:
            # its output into our pipe: spawn opens the path it is given for appending
            self.child = self._spawn(argv, log_path=f"/proc/self/fd/{w}")
        except (LlmtopError, OSError) as exc:
            os.close(r)
            self._failed(str(exc), out)
            return False
        finally:
            os.close(w)
        os.set_blocking(r, False)
        self._fd, self._started = r, True
        self.failures, self._error = 0, None
        return True

    def _failed(self, why: str, out: TailRead) -> None:
        self.failures += 1
        self.next_try = clock.monotonic() + retry_after(self.failures)
        self._error = out.error = why

    def _end(self) -> int | None:
        status = None
        if self.child is not None:
            status = self.child.stop(timeout_s=2.0)  # SIGTERM, SIGKILL, reaped
            self.child = None
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        return status

    def close(self) -> None:
        """End the child and reap it (idempotent)."""
        self._end()
