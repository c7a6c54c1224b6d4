"""The journal's live path: a process writes to the journal through ``systemd-cat``, and
``journalctl -o json --follow _PID=<its pid>`` as the follower runs it hands its line over.

Skipped with the reason where there is no running journal (no ``journalctl``,
``systemd-cat`` or ``/run/systemd/journal/socket``: a container without systemd).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from llmtop.model import LogLocation
from llmtop.parse.logs import assembler
from llmtop.sources.logs import Follower


def _why_not() -> str | None:
    for exe in ("journalctl", "systemd-cat"):
        if shutil.which(exe) is None:
            return f"no {exe} here"
    if not os.path.exists("/run/systemd/journal/socket"):
        return "no running journal here (/run/systemd/journal/socket is missing)"
    return None


@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_a_line_written_to_the_journal_is_followed_by_pid() -> None:
    mark = f"llmtop journal test {os.getpid()} {time.time():.0f}"
    proc = subprocess.Popen(["systemd-cat", "-t", "llmtop-test", "sh", "-c",
                             f"sleep 1; echo '{mark}'; sleep 20"])
    f = Follower(assembler, thread=False)
    try:
        f.follow("t", LogLocation("journal", "journal (test)", pid=proc.pid))
        texts: list[str] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(mark in t for t in texts):
            f.poll()
            texts += [" ".join(e.lines) for r in f.drain() for e in r.events]
            time.sleep(0.1)
        assert any(mark in t for t in texts), texts
    finally:
        f.close()
        proc.kill()
        proc.wait(timeout=10)
