"""Closing the terminal (or killing llmtop) leaves no process and no temporary folder.

Each command runs in its own tmux server, as a user would run it, with a tag in its
environment and ``TMPDIR`` pointing at an empty folder. It is ended the four ways a user
ends it: the terminal closed (``tmux kill-session``: SIGHUP), ``kill`` (SIGTERM), Ctrl-C
(the key, through tmux) and ``kill -9`` (SIGKILL: the children's watchdog must notice).
Then no process carrying the tag may be left, and the folder must be empty.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llmtop.demo.fleet import find_binary
from llmtop.demo.launcher import DemoHandle, start_demo

REPO = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None,
                                reason="tmux is not installed (apt-get install tmux); "
                                "the cleanup tests drive llmtop in a real terminal")
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

    def __init__(self, tmp_path: Path, args: list[str], width: int = 120, height: int = 40):
        self.tag = uuid.uuid4().hex
        self.socket = f"llmtop-test-{self.tag[:12]}"
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        conf = tmp_path / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\n")
        env = {"TMPDIR": str(self.tmpdir), TAG_ENV: self.tag, "PYTHONPATH": str(REPO),
               "XDG_CONFIG_HOME": str(tmp_path / "no-config"), "TERM": "xterm-256color",
               "TEXTUAL_ANIMATIONS": "none"}
        cmd = "exec env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + \
            shlex.join([sys.executable, "-m", "llmtop", *args])
        self.tmux("-f", str(conf), "new-session", "-d", "-s", "main", "-x", str(width),
                  "-y", str(height), "-c", str(REPO), cmd)
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


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Callable[..., Term]]:
    made: list[Term] = []

    def make(args: list[str], **kw: int) -> Term:
        t = Term(tmp_path, args, **kw)
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


@pytest.fixture(scope="module")
def engine() -> Iterator[DemoHandle]:
    """Demo engines for the probe to load (this test's own child, not tagged)."""
    demo = start_demo(engines=["vllm"])
    yield demo
    demo.stop()


def _check(t: Term, how: str) -> None:
    t.end(how)
    procs, files = t.left_behind()
    assert procs == [], f"processes left after {how}: {procs}"
    assert files == [], f"temporary files left after {how}: {files}"


WAYS = ["hup", "term", "int", "kill"]


@pytest.mark.parametrize("how", WAYS)
def test_demo_tui(term, how):
    t = term(["--demo"])
    t.wait_for(lambda s: "sglang" in s and "triton" in s)
    assert len(tagged(t.tag)) >= 3  # llmtop, its watchdog, the demo engines
    _check(t, how)


@pytest.mark.parametrize("how", WAYS)
def test_record_demo(term, tmp_path, how):
    t = term(["record", "--demo", str(tmp_path / "rec.llmrec")])
    t.wait_for(lambda s: "first seen" in s)
    _check(t, how)
    assert (tmp_path / "rec.llmrec").exists()  # what was recorded is kept


@pytest.mark.parametrize("how", WAYS)
def test_probe(term, engine, tmp_path, how):
    t = term(["probe", engine.targets[0].base_url, "--duration", "60",
              "--json", str(tmp_path / "probe.json")])
    t.wait_for(lambda s: "in flight" in s)
    _check(t, how)


@pytest.mark.parametrize("how", ["hup", "kill"])
def test_demo_serve(term, how):
    t = term(["demo", "serve"])
    t.wait_for(lambda s: "Ctrl-C to stop" in s)
    _check(t, how)


needs_prometheus = pytest.mark.skipif(
    find_binary("prometheus") is None,
    reason="no prometheus binary (bash scripts/fleet_servers.sh, or LLMTOP_PROMETHEUS_BIN)")


@needs_prometheus
@pytest.mark.parametrize("how", WAYS)
def test_demo_fleet_tui(term, how):
    t = term(["demo", "fleet", "--engines", "2", "--scrape-interval", "0.5"])
    t.wait_for(lambda s: "prometheus http://127.0.0.1" in s and "GPUs" in s, within_s=90)
    assert any("prometheus" in p.split()[1] for p in tagged(t.tag))
    _check(t, how)


@needs_prometheus
@pytest.mark.parametrize("how", ["hup", "kill"])
def test_demo_fleet_serve(term, how):
    t = term(["demo", "fleet", "--engines", "2", "--scrape-interval", "0.5", "--serve"])
    t.wait_for(lambda s: "Ctrl-C to stop" in s, within_s=90)
    _check(t, how)


@pytest.mark.skipif(find_binary("victoria-metrics") is None,
                    reason="no victoria-metrics binary (bash scripts/fleet_servers.sh)")
def test_demo_fleet_victoria_closed_terminal(term):
    t = term(["demo", "fleet", "--engines", "2", "--scrape-interval", "0.5", "--serve",
              "--backend", "victoriametrics"])
    t.wait_for(lambda s: "Ctrl-C to stop" in s, within_s=90)
    _check(t, "hup")
