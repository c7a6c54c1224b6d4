"""A real terminal for end-to-end tests: llmtop run inside its own tmux server.

``Term`` starts one ``python -m llmtop ...`` command in a tmux server of its own (a unique
socket), with a tag in its environment and ``TMPDIR`` pointing at an empty folder, so a test
can read the screen, press keys, end it the ways a user does and then look for anything
left behind (``tagged``: every live process carrying the tag).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None,
                                reason="tmux is not installed (apt-get install tmux): these "
                                "tests drive llmtop in a real terminal")
TAG_ENV = "LLMTOP_CLEANUP_TEST_TAG"


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def tagged(tag: str) -> list[str]:
    """'PID COMMAND' of every live (not zombie) process whose environment carries ``tag``."""
    want = f"{TAG_ENV}={tag}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        if _state(pid) not in ("Z", "X", "gone"):
            found.append(f"{pid} {cmd}")
    return found


class Term:
    """A tmux server of its own running one llmtop command."""

    def __init__(self, tmp_path: Path, args: list[str], width: int = 120, height: int = 40,
                 cwd: Path | None = None):
        self.tag = uuid.uuid4().hex
        self.socket = f"llmtop-test-{self.tag[:12]}"
        self.tmpdir = tmp_path / f"tmp-{self.tag[:8]}"
        self.tmpdir.mkdir()
        conf = tmp_path / f"tmux-{self.tag[:8]}.conf"
        conf.write_text("set -g remain-on-exit on\n")
        env = {"TMPDIR": str(self.tmpdir), TAG_ENV: self.tag, "PYTHONPATH": str(REPO),
               "XDG_CONFIG_HOME": str(tmp_path / "no-config"), "TERM": "xterm-256color",
               "TEXTUAL_ANIMATIONS": "none"}
        cmd = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + \
            shlex.join([sys.executable, "-m", "llmtop", *args])
        self.tmux("-f", str(conf), "new-session", "-d", "-s", "main", "-x", str(width),
                  "-y", str(height), "-c", str(cwd or REPO), cmd)
        self.pid = int(self.tmux("display-message", "-p", "-t", "main", "#{pane_pid}").strip())

    def tmux(self, *args: str) -> str:
        assert TMUX is not None
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True,
                               text=True, timeout=20, check=True).stdout

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", "main")
        except subprocess.CalledProcessError:
            return ""

    def wait_for(self, ready: Callable[[str], bool], within_s: float = 60.0) -> None:
        end = time.monotonic() + within_s
        while time.monotonic() < end:
            text = self.screen()
            if ready(text):
                return
            if _state(str(self.pid)) in ("Z", "X", "gone"):
                raise AssertionError(f"llmtop ended before it was ready:\n{text}")
            time.sleep(0.2)
        raise AssertionError(f"not ready within {within_s:.0f} s:\n{self.screen()}")

    def alive(self) -> bool:
        return _state(str(self.pid)) not in ("Z", "X", "gone")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "main", *keys)

    def end(self, how: str) -> None:
        if how == "hup":
            self.tmux("kill-session", "-t", "main")
        elif how == "int":
            self.tmux("send-keys", "-t", "main", "C-c")
        else:
            os.kill(self.pid, signal.SIGTERM if how == "term" else signal.SIGKILL)

    def left_behind(self, within_s: float = 20.0) -> tuple[list[str], list[str]]:
        """Processes and temporary entries still there after up to ``within_s``."""
        end = time.monotonic() + within_s
        while True:
            procs, files = tagged(self.tag), sorted(os.listdir(self.tmpdir))
            if (not procs and not files) or time.monotonic() > end:
                return procs, files
            time.sleep(0.1)

    def close(self) -> None:
        """Whatever the test did: no tmux server and no tagged process is left."""
        try:
            self.tmux("kill-server")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        for line in tagged(self.tag):
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except OSError:
                pass
