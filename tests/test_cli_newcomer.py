"""What tripped a new user at the command line (issue 27), each fixed and kept fixed."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from llmtop.cli.argv import glue_dash_values
from llmtop.cli.monitor import build_parser

REPO = Path(__file__).resolve().parent.parent


def _llmtop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmtop", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd or REPO, stdin=subprocess.DEVNULL)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_at_takes_a_value_that_starts_with_a_dash():
    assert glue_dash_values(["--prometheus", "u", "--at", "-2h", "--once"]) == \
        ["--prometheus", "u", "--at=-2h", "--once"]
    assert glue_dash_values(["--at", "--once"]) == ["--at", "--once"]  # still "missing"
    assert glue_dash_values(["--", "--at", "-2h"]) == ["--", "--at", "-2h"]
    args = build_parser().parse_intermixed_args(glue_dash_values(["--at", "-2h", "--once"]))
    assert args.at == "-2h" and args.once


def test_fleet_at_minus_two_hours_runs_as_the_docs_show():
    # docs/fleet.md: llmtop --prometheus http://vm:8428 --at -2h --once (nothing listens here)
    r = _llmtop("--prometheus", f"http://127.0.0.1:{_closed_port()}", "--at", "-2h", "--once")
    assert "expected one argument" not in r.stderr
    assert r.returncode == 1 and "cannot reach" in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["record", "{d}/no/such/dir/box.llrec", "127.0.0.1:1"],
                                  ["--record", "{d}/no/such/dir/box.llrec", "--once",
                                   "127.0.0.1:1"]])
def test_a_recording_in_a_missing_folder_is_one_clear_line(tmp_path, args):
    r = _llmtop(*[a.format(d=tmp_path) for a in args])
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"llmtop: {tmp_path}/no/such/dir/box.llrec: No such file or directory"
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


def test_probe_of_a_server_that_is_down_says_why_in_words():
    r = _llmtop("probe", f"http://127.0.0.1:{_closed_port()}")
    assert r.returncode == 2
    assert "cannot reach" in r.stderr and "ConnectError" not in r.stderr, r.stderr


def test_demo_fleet_says_what_it_is_waiting_for(monkeypatch, capsys):
    from llmtop.cli.demo import main as demo_main
    from llmtop.demo import fleet

    def fail(*_a, **_k):
        raise fleet.LlmtopError("prometheus did not answer")

    monkeypatch.setattr(fleet, "find_binary", lambda name: "/usr/bin/prometheus")
    monkeypatch.setattr(fleet, "start_demo_fleet", fail)
    assert demo_main(["fleet", "--engines", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("llmtop demo fleet: starting 3 demo engines and prometheus on "
                          "127.0.0.1")
    assert "prometheus did not answer" in err


@pytest.mark.parametrize("args", [["record", "{d}/x.llrec", "127.0.0.1:1", "--duration", "-5"],
                                  ["replay", "{d}/x.llrec", "--once", "--window", "-3"],
                                  ["replay", "{d}/x.llrec", "--speed", "nan"]])
def test_record_and_replay_refuse_a_number_out_of_range(tmp_path, args):
    r = _llmtop(*[a.format(d=tmp_path) for a in args])
    assert r.returncode == 2 and "must be a finite number > 0" in r.stderr, r.stderr
    assert not (tmp_path / "x.llrec").exists()
