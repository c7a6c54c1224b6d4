"""Closing the terminal (or killing llmtop) leaves no process and no temporary folder.

Each command runs in its own tmux server, as a user would run it, with a tag in its
environment and ``TMPDIR`` pointing at an empty folder. It is ended the four ways a user
ends it: the terminal closed (``tmux kill-session``: SIGHUP), ``kill`` (SIGTERM), Ctrl-C
(the key, through tmux) and ``kill -9`` (SIGKILL: the children's watchdog must notice).
Then no process carrying the tag may be left, and the folder must be empty.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from llmtop.demo.fleet import find_binary
from llmtop.demo.launcher import DemoHandle, start_demo
from tests.e2e.terminal import Term, needs_tmux, tagged

pytestmark = [needs_tmux, pytest.mark.ci_step]  # a real terminal (tmux): the ci_step tier


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
