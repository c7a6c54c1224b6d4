"""Bake-off plans: engines llmtop starts itself (cold start, failed start, stop, Ctrl-C),
the plan file, and the command line (SIGINT, only 127.0.0.1 contacted)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from llmtop.errors import ConfigError
from llmtop.gpu import NullSampler
from llmtop.loadgen.bakeoff import StopFlag, run_bakeoff
from llmtop.loadgen.options import ProbeOptions
from llmtop.loadgen.plan import EngineSpec, parse_plan
from llmtop.monitor import Monitor


def no_gpu_monitor(config):
    """The monitor the CLI uses, without GPU sampling (tests run on any box)."""
    return Monitor(config, gpu_sampler=NullSampler())


FAKE = str(Path(__file__).with_name("bakeoff_fake.py"))
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_cmd(port: int, *args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, FAKE, "--port", str(port), *args))


def gone(pgid: int) -> bool:
    """No live process is left in the group llmtop started (pid == pgid); a zombie that
    init has not reaped yet is not alive."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()  # state ppid pgrp ...
            if int(fields[2]) == pgid and fields[0] != "Z":
                return False
    return True


def fake_clock(log: str, what: str = "LISTENING", nth: int = 0) -> float:
    """The fake's own CLOCK_MONOTONIC time of its ``nth`` BOOTING, LISTENING, POST or
    FIRST_TOKEN line, from its log."""
    times = [float(line.split()[1]) for line in Path(log).read_text().splitlines()
             if line.startswith(what + " ")]
    assert len(times) > nth, f"the fake logged {what} {len(times)} times"
    return times[nth]


def small_options(url: str) -> ProbeOptions:
    return ProbeOptions(url=url, levels=(1, 2), requests_per_step=8, output_tokens=8,
                        prompt_tokens=16)


def test_cold_start_failed_start_and_every_process_stopped(tmp_path):
    boot = 2.0
    p1, p3 = free_port(), free_port()
    engines = [
        EngineSpec("boots-in-2s", f"http://127.0.0.1:{p1}",
                   start=fake_cmd(p1, "--boot-delay", str(boot)), ready_timeout_s=30),
        EngineSpec("fails", f"http://127.0.0.1:{free_port()}",
                   start=fake_cmd(free_port(), "--fail-boot"), ready_timeout_s=30),
        EngineSpec("never-ready", f"http://127.0.0.1:{free_port()}",
                   start="echo still loading weights; sleep 60", ready_timeout_s=1.5,
                   stop_timeout_s=2),
        EngineSpec("nobody-home", f"http://127.0.0.1:{free_port()}"),  # not started, down
        EngineSpec("fine", f"http://127.0.0.1:{p3}", start=fake_cmd(p3), ready_timeout_s=30),
    ]
    t0 = time.monotonic()
    rep = run_bakeoff(engines, small_options(engines[0].url), log_dir=str(tmp_path),
                      watch_interval_s=0.2, new_monitor=no_gpu_monitor)
    first, fails, never, down, fine = rep["endpoints"]
    # cold start: start -> ready -> first token, bracketed by the fake's own clock with no
    # race: llmtop starts the engine after t0 and before the fake boots; it is ready after the
    # fake listens and before it sends the first request; it has the first token after the
    # fake wrote it and before it sends the next request
    assert first["error"] is None
    log = first["log"]
    booting, listening = fake_clock(log, "BOOTING"), fake_clock(log)
    post1, post2 = fake_clock(log, "POST"), fake_clock(log, "POST", 1)
    assert first["cold_start_s"] >= boot
    assert fake_clock(log, "FIRST_TOKEN") - booting <= first["cold_start_s"] <= post2 - t0
    assert listening - booting <= first["ready_s"] <= post1 - t0
    # a start that fails: an error row with the log's last lines; the others still run
    assert "exited (status 3)" in fails["error"]
    assert "CUDA out of memory (simulated" in fails["log_tail"]
    assert "not ready after 1.5 s" in never["error"] and "still loading" in never["log_tail"]
    assert "cannot reach" in down["error"] and down["cold_start_s"] is None
    assert fine["error"] is None and [s["concurrency"] for s in fine["steps"]] == [1, 2]
    assert fine["cold_start_s"] is not None
    assert any("fails:" in w for w in rep["warnings"])
    for e in (first, fails, never, fine):
        assert e["started_by_llmtop"] and gone(e["pid"]), e["name"]
        assert Path(e["log"]).is_file()


def test_ctrl_c_while_an_engine_starts_stops_it(tmp_path):
    stop = StopFlag()
    engines = [EngineSpec("slow-boot", f"http://127.0.0.1:{free_port()}",
                          start="sleep 60", ready_timeout_s=60, stop_timeout_s=2),
               EngineSpec("next", f"http://127.0.0.1:{free_port()}", start="sleep 60")]
    threading.Timer(1.0, lambda: setattr(stop, "count", 1)).start()
    t = time.monotonic()
    rep = run_bakeoff(engines, small_options(engines[0].url), log_dir=str(tmp_path),
                      stop=stop, new_monitor=no_gpu_monitor)
    assert time.monotonic() - t < 30  # a bound, not a timing: sleep 60 never finished
    a, b = rep["endpoints"]
    assert "Ctrl-C" in a["error"] and gone(a["pid"])
    assert b["error"].startswith("not run") and "pid" not in b
    assert rep["partial"] is True


def test_plan_file_is_checked():
    plan = parse_plan('[probe]\nlevels = [1, 8]\noutput-tokens = 32\n\n'
                      '[[engine]]\nname = "a"\nurl = "http://127.0.0.1:8000"\n'
                      'start = "vllm serve m"\nenv = { X = 1 }\ngpus = 2\n'
                      'gpu_hour_price = 3.5\n\n'
                      '[[engine]]\nurl = "http://127.0.0.1:30000"\n')
    a, b = plan.engines
    assert (a.name, a.start, a.env, a.gpus, a.gpu_hour_price) == ("a", "vllm serve m",
                                                                  {"X": "1"}, 2.0, 3.5)
    assert b.name == "http://127.0.0.1:30000" and b.start is None
    assert plan.probe == {"levels": [1, 8], "output_tokens": 32}
    for bad, why in [("[[engine]]\nname = 'x'\n", "needs url"),
                     ("[[engine]]\nurl = 'ftp://x'\n", "not an http"),
                     ("[[engine]]\nurl = 'http://a:1'\nstrat = 'x'\n", "unknown key"),
                     ("[[engine]]\nurl = 'http://a:1'\n[[engine]]\nurl = 'http://a:1'\n",
                      "used twice"),
                     ("[probe]\nlevels = [1]\n", "no [[engine]]"),
                     ("[[engine]\n", "not valid TOML"),
                     ("[[engine]]\nurl = 'http://a:1'\ngpus = -1\n", "must be a number")]:
        with pytest.raises(ConfigError, match=why.replace("[", r"\[")):
            parse_plan(bad)


def served(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=2) as r:
            return json.loads(r.read())["requests"]
    except OSError:
        return 0


_SITE = '''
import os, socket
_log = os.environ["BAKEOFF_CONNECT_LOG"]
_orig = socket.socket.connect
def connect(self, addr):
    with open(_log, "a") as f:
        f.write(repr(addr) + "\\n")
    return _orig(self, addr)
socket.socket.connect = connect
'''


def test_cli_ctrl_c_keeps_the_partial_report_and_stops_the_engine(tmp_path):
    """The real command: a plan of two engines llmtop starts; SIGINT during the first one's
    load. Every connection any llmtop process made (worker included) went to 127.0.0.1."""
    (tmp_path / "sitecustomize.py").write_text(_SITE)
    log = tmp_path / "connects.log"
    p1, p2 = free_port(), free_port()
    (tmp_path / "plan.toml").write_text(
        "[probe]\nlevels = [1, 2, 4]\nrequests_per_step = 400\noutput_tokens = 32\n\n"
        f'[[engine]]\nname = "one"\nurl = "http://127.0.0.1:{p1}"\n'
        f"start = '''{fake_cmd(p1, '--itl', '0.01')}'''\n\n"
        f'[[engine]]\nname = "two"\nurl = "http://127.0.0.1:{p2}"\n'
        f"start = '''{fake_cmd(p2)}'''\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}",
               XDG_STATE_HOME=str(tmp_path),
               BAKEOFF_CONNECT_LOG=str(log))
    out = tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, "-m", "llmtop", "probe", "--plan",
                             str(tmp_path / "plan.toml"), "--json", str(out)],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(300):  # until the first engine has served 10 requests of the load
            time.sleep(0.1)
            if served(p1) > 12:
                break
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    rep = json.loads(out.read_text())
    one, two = rep["endpoints"]
    assert rep["kind"] == "bakeoff" and rep["partial"] is True
    assert one["error"] is None and one["steps"] and one["partial"] is True
    assert two["error"].startswith("not run")
    assert gone(one["pid"])
    assert f"log {one['log']}" in stderr
    peers = {line.strip() for line in log.read_text().splitlines()}
    assert peers and all(p.startswith("('127.0.0.1',") or not p.startswith("(")
                         for p in peers), peers


def test_the_command_line_wins_over_the_plan():
    from llmtop.cli.bakeoff import apply_plan_options, given_on_command_line
    from llmtop.cli.probe import build_parser

    parser = build_parser()
    argv = ["--plan", "p.toml", "--output-tokens=64", "--seed", "3"]
    ns = parser.parse_intermixed_args(argv)
    apply_plan_options(ns, parser, {"output_tokens": 16, "seed": 9, "levels": [1, 10],
                                    "ttft_slo": 0.5, "gpu_hour_price": 2},
                       given_on_command_line(parser, argv))
    assert (ns.output_tokens, ns.seed) == (64, 3)  # given on the command line
    assert (ns.levels, ns.ttft_slo, ns.gpu_hour_price) == ("1,10", 0.5, 2.0)
    for bad in ({"api_key": "x"}, {"output_tokenz": 1}, {"seed": "many"}, {"sweep": "yes"}):
        with pytest.raises(ConfigError):
            apply_plan_options(parser.parse_intermixed_args([]), parser, bad, set())


def test_engines_end_when_llmtop_is_killed(tmp_path):
    """SIGKILL leaves llmtop no handler to run: the children watchdog ends the engine."""
    port = free_port()
    (tmp_path / "plan.toml").write_text(
        "[probe]\nlevels = [1]\nrequests_per_step = 400\noutput_tokens = 32\n\n"
        f'[[engine]]\nname = "one"\nurl = "http://127.0.0.1:{port}"\n'
        f"start = '''{fake_cmd(port, '--itl', '0.01')}'''\n")
    proc = subprocess.Popen([sys.executable, "-m", "llmtop", "probe", "--plan",
                             str(tmp_path / "plan.toml")], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(ROOT),
                                     XDG_STATE_HOME=str(tmp_path)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        pid = None
        for line in proc.stderr:  # "llmtop probe:   started: pid N, log PATH"
            if "started: pid " in line:
                pid = int(line.split("started: pid ")[1].split(",")[0])
                break
        assert pid is not None
        for _ in range(300):
            if served(port) > 5:
                break
            time.sleep(0.1)
        assert served(port) > 5
        proc.kill()
        proc.wait(10)
        for _ in range(100):  # the watchdog's grace period is a few seconds
            if gone(pid):
                break
            time.sleep(0.1)
        assert gone(pid)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_start_command_finds_this_llmtop_without_an_activated_venv(tmp_path):
    """`llmtop demo serve` in a plan must mean this llmtop even when only `.venv/bin/llmtop`
    was typed (the venv's bin folder is not on PATH): a new user's first plan failed so."""
    import sys

    from llmtop.loadgen.engines import EngineProcess

    out = tmp_path / "path.txt"
    bare = {"PATH": "/usr/bin:/bin"}  # no venv on it, as in a shell that never activated one
    proc = EngineProcess.start(f'echo "$PATH" > {out}', env=bare, log_path=str(tmp_path / "l"))
    proc.child.proc.wait(10)
    proc.stop(timeout_s=2)
    first = out.read_text().strip().split(os.pathsep)[0]
    assert first == os.path.dirname(sys.executable)
    assert out.read_text().strip().endswith("/usr/bin:/bin")
