"""Every ``llmtop ...`` command shown in README.md and docs/*.md works as shown.

The commands are read from the documents' code blocks (a synopsis's ``[optional]`` parts
dropped), the example addresses replaced by the demo engines' (and a demo fleet's
Prometheus), and run in the documents' order where one reads what another wrote (the files a
probe or a recording writes are what ``probe compare`` and ``replay`` read). A command that prints
and exits must exit 0 (1 for autodiscovery on a machine with no engine, with that said);
a TUI or a server must come up in a real terminal (tmux, 80x24) and stay up until told to
stop. A probe is bounded to a few seconds (``--duration``). Only the commands in ``REMOTE``
are not run: they need hosts this machine does not have.

Each distinct command is its own test, spread over the xdist workers; a chain (recordings
then replays; every probe, then ``probe compare``; the fleet examples sharing one
Prometheus; the commands on default ports) stays in one ``xdist_group``, in order, in one
working folder.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llmtop.cli.commands import COMMANDS
from llmtop.demo import fleet_bins
from llmtop.demo.fleet import RunningFleet, find_binary, free_port, start_demo_fleet
from llmtop.demo.launcher import DemoHandle, start_demo
from llmtop.errors import LlmtopError
from tests.e2e.terminal import REPO, Term, needs_tmux

pytestmark = [needs_tmux, pytest.mark.ci_step]  # a real terminal (tmux): the ci_step tier

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

REMOTE = {
    "llmtop vllm@10.0.0.5:8000 https://gpu2:8002/metrics dcgm@gpu2:9400":
        "engines and a DCGM exporter on other hosts, over TLS",
}
"""Commands not run, and why (keep this short: everything else runs here)."""

CHECKED = {
    "tune": "minutes of real time (one engine per configuration): parsed here, its plan read "
            "and each trial's start command parsed; .ci/run's 'README tune command' step runs "
            "it whole",
}
"""Subcommands whose documented commands are checked, not run, here, and why."""


@dataclass(frozen=True)
class DocCommand:
    """One command as a document shows it."""

    doc: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: {self.text}"


def _strip_synopsis(text: str) -> str:
    """``llmtop record F [TARGET ...] [--interval S]`` -> ``llmtop record F TARGET``."""
    text = re.sub(r"\[TARGET \.\.\.\]", "TARGET", text)  # kept: the demo's engine stands in
    prev = None
    while prev != text:
        prev, text = text, re.sub(r"\s*\[[^\[\]]*\]", "", text)
    return text


def doc_commands() -> list[DocCommand]:
    """The ``llmtop`` commands of every code block, in document order."""
    out: list[DocCommand] = []
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        in_block, block_has_prompt, i = False, False, 0
        while i < len(lines):
            line, start = lines[i], i + 1
            i += 1
            if line.lstrip().startswith("```"):
                in_block = not in_block
                if in_block and line.strip() == "```text":  # printed output, no commands
                    i = next((j + 1 for j in range(i, len(lines))
                              if lines[j].lstrip().startswith("```")), len(lines))
                    in_block = False
                    continue
                if in_block:  # a block with "$ " prompts: its other lines are output
                    end = next((j for j in range(i, len(lines))
                                if lines[j].lstrip().startswith("```")), len(lines))
                    block_has_prompt = any(x.startswith("$ ") for x in lines[i:end])
                continue
            if not in_block:
                continue
            while line.endswith("\\") and i < len(lines):
                line = line[:-1] + " " + lines[i].strip()
                i += 1
            if block_has_prompt:
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            cmd = _strip_synopsis(line.split("&&")[-1].strip())
            try:
                words = shlex.split(cmd, comments=True)
            except ValueError:
                continue
            if not words or not (words[0] == "llmtop" or words[0].endswith("/bin/llmtop")):
                continue
            text = shlex.join(["llmtop", *words[1:]])
            out.append(DocCommand(path.relative_to(REPO).as_posix(), start, text))
    return out


def test_the_documents_show_commands():
    cmds = [c.text for c in doc_commands()]
    assert "llmtop --demo" in cmds  # the README's first command
    assert any(c.startswith("llmtop probe ") and "--html" in c for c in cmds)
    assert any(c.startswith("llmtop replay ") for c in cmds)
    assert set(REMOTE) <= set(cmds), "a skipped command is no longer in the documents"
    assert any(c.startswith("llmtop tune ") for c in cmds)  # the README's path, step 4
    assert "llmtop capacity list" in cmds  # step 5


def test_help_of_every_command():
    subs = {" ".join(w for w in shlex.split(c.text)[1:3] if not w.startswith("-")
                     and w in {x for cmd in COMMANDS for x in cmd.split()})
            for c in doc_commands()}
    for sub in sorted(subs | {"", *COMMANDS}):
        argv = [sys.executable, "-m", "llmtop", *sub.split(), "--help"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0 and "usage:" in r.stdout, (sub, r.stdout, r.stderr)


# -- running them --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo() -> Iterator[DemoHandle]:
    handle = start_demo(engines=["vllm", "sglang", "triton"])
    yield handle
    handle.stop()


@pytest.fixture(scope="module")
def fleet() -> Iterator[RunningFleet | None]:
    if find_binary("prometheus") is None:
        yield None
        return
    # 10 samples a target (1 s apart) before the first command: `--at -5s` has data to read
    running = start_demo_fleet(2, scrape_interval_s=1.0, down=0, min_samples=10)
    yield running
    running.stop()


def _fleet_binary_missing() -> str | None:
    """None when ``llmtop demo fleet`` has its Prometheus, fetched now the way the command
    itself does with consent (``--yes``) where it is missing; else why it cannot run here."""
    if find_binary("prometheus"):
        return None
    try:
        fleet_bins.fetch()
    except LlmtopError as exc:
        return f"no prometheus binary and none can be fetched here: {exc}"
    return None if find_binary("prometheus") else "no prometheus binary after fetching"


def _substitute(text: str, demo: DemoHandle, fleet: RunningFleet | None,
                work: Path) -> str | None:
    """The command with the demo's addresses for the examples' (None: cannot run here)."""
    vllm, sglang = demo.targets[0], demo.targets[1]
    if "prometheus:9090" in text or "vm:8428" in text:
        if fleet is None:
            return None
        text = re.sub(r"http://(prometheus:9090|vm:8428)", fleet.url, text)
    text = re.sub(r"http://(127\.0\.0\.1|10\.0\.0\.5):8000", vllm.base_url, text)
    text = text.replace("127.0.0.1:8000", f"127.0.0.1:{vllm.port}")
    text = re.sub(r"(?<=\s):30000\b", f":{sglang.port}", text)
    text = text.replace("/var/lib/llmtop/", "").replace("%H", "host")  # systemd's %H: host
    # the demo fleet has no namespaces: select its engines by job instead
    text = text.replace("""'namespace=~"prod-.*"'""", """'job=~"vllm|sglang"'""")
    # the engines' default ports may be taken on a shared machine: free ones, same shape
    text = text.replace("--ports 8000,30000,8002",
                        "--ports " + ",".join(str(free_port()) for _ in range(3)))
    words = shlex.split(text)
    if "--at" in words and words[:2] == ["llmtop", "replay"]:  # a time inside the recording
        words[words.index("--at") + 1] = _recorded_time(work / words[2])
    elif "--at" in words:  # the demo fleet's Prometheus has the last minute only
        words[words.index("--at") + 1] = "-5s"
    words = [vllm.name if w == "TARGET" else w for w in words]  # a synopsis' [TARGET ...]
    if "--listen" in words:  # the exporter's example port may be taken: a free one
        i = words.index("--listen") + 1
        words[i] = f"127.0.0.1:{free_port()}"
    if words[1:2] == ["probe"] and words[2:3] != ["compare"]:
        words += ["--duration", "3", "--max-concurrency", "4"]
    return shlex.join(words)


def _recorded_time(path: Path) -> str:
    """HH:MM:SS of the last second of a recording (from ``replay --once``'s complaint)."""
    r = subprocess.run([sys.executable, "-m", "llmtop", "replay", str(path), "--at", "00:00:00",
                        "--once"], capture_output=True, text=True, timeout=60, cwd=path.parent)
    m = re.search(r"\((\d\d:\d\d:\d\d)[–-](\d\d:\d\d:\d\d)\)", r.stderr)
    assert m, f"no time range in: {r.stderr}"
    return m.group(2)


def _is_tui(words: list[str]) -> bool:
    if words[1:2] in (["probe"], ["capacity"]):  # print and exit
        return False
    if words[1:2] in (["record"], ["export"]) or words[1:3] in (["demo", "serve"],
                                                               ["demo", "fleet"]):
        return True
    return "--once" not in words


def _ready(words: list[str], screen: str) -> bool:
    if words[1:2] == ["record"]:
        return "first seen" in screen or "recording" in screen
    if words[1:3] == ["demo", "serve"]:
        return "Ctrl-C to stop" in screen
    if words[1:2] == ["export"]:
        return "serving http" in screen
    return "llmtop" in screen and ("REPLAY" in screen or "ENGINE" in screen
                                   or "No engines" in screen or "no engine" in screen.lower())


def _run_in_terminal(tmp_path: Path, work: Path, words: list[str]) -> str | None:
    """Start a TUI / server in tmux at 80x24; None when it came up and stopped cleanly."""
    t = Term(tmp_path, words[1:], width=80, height=24, cwd=work)
    try:
        try:
            t.wait_for(lambda s: _ready(words, s), within_s=90)
        except AssertionError as exc:
            if _discovering(words) and "give a TARGET" in t.screen():
                return None  # autodiscovery on a machine with no engine, with that said
            return str(exc)
        time.sleep(1.0)
        screen = t.screen()
        if "Traceback" in screen or not t.alive():
            return f"not running a second later:\n{screen}"
        t.keys("C-c")
        end = time.monotonic() + 20
        while t.alive() and time.monotonic() < end:
            time.sleep(0.1)
        if t.alive():
            return f"still running 20 s after Ctrl-C:\n{t.screen()}"
        return None
    finally:
        t.close()


def _discovering(words: list[str]) -> bool:
    """No target given: the command autodiscovers engines on this machine."""
    if "--demo" in words or "--prometheus" in words:
        return False
    args = words[2:] if words[1:2] in (["record"], ["export"]) else words[1:]
    if words[1:2] == ["record"]:
        args = args[1:]  # the recording's file
    flags_with_value = {"--listen", "--retention", "--max-size", "--record", "--interval"}
    positional = [w for i, w in enumerate(args)
                  if not w.startswith("-") and (i == 0 or args[i - 1] not in flags_with_value)]
    return not positional


def _check_tune(words: list[str]) -> str | None:
    """``llmtop tune ...`` as documented: its flags parse, its plan (a path from the
    checkout's root) reads, its ``[probe]`` table makes probe options, and each trial's start
    command is a ``llmtop demo serve`` its own parser takes (None: all hold)."""
    from llmtop.cli import tune
    from llmtop.cli.demo import build_parser as demo_parser
    from llmtop.tune.space import expand, read_tune_plan, render

    ns = tune.build_parser().parse_args(words[2:])
    plan = read_tune_plan(str(REPO / ns.plan))
    tune._options(plan, None)
    configs = expand(plan.space)
    for cfg in configs:
        start = shlex.split(render(plan.start, cfg, 8000))
        if start[:3] != ["llmtop", "demo", "serve"]:
            return f"a trial does not start the demo: {start}"
        demo_parser().parse_args(start[2:])  # a bad flag exits 2: the test fails
    return None if configs else "the plan has no configuration"


def _run(work: Path, words: list[str]) -> str | None:
    r = subprocess.run([sys.executable, "-m", "llmtop", *words[1:]], capture_output=True,
                       text=True, timeout=180, cwd=work, stdin=subprocess.DEVNULL)
    out = r.stdout[-1500:] + r.stderr[-1500:]
    if "Traceback" in out:
        return f"traceback:\n{out}"
    if r.returncode == 0 or (_discovering(words) and r.returncode == 1 and "found" in r.stderr):
        return None
    return f"exit {r.returncode}:\n{out}"


def _chain(text: str) -> str | None:
    """The chain a command belongs to: its consumers read what its producers wrote, so a
    chain runs in one worker, in order, in one working folder (None: it stands alone)."""
    if text.startswith("llmtop replay") or ".llrec" in text:
        return "record"  # the recordings, then the replays that read box.llrec
    if text.startswith("llmtop probe "):
        # before.json and after.json, then probe compare; and every probe one at a time
        # against one demo, as before: probes at once starve each other's 3 s windows
        return "probe"
    if "prometheus:9090" in text or "vm:8428" in text:
        return "fleet"  # one demo fleet's Prometheus for all of them, not one per worker
    if (text.startswith("llmtop export") and "--listen" not in text) or \
            text == "llmtop demo serve":
        return "default-ports"  # 9464, 8000/30000/8002: one at a time, as a user runs them
    return None


def _rank(c: DocCommand) -> int:
    """Producers first: replay after the recordings, probe compare after the probes."""
    return 2 if " compare " in c.text else 1 if c.text.startswith("llmtop replay") else 0


def _params() -> list:
    """One test per distinct command; the chains first (the longest poles start first),
    each chain in one ``xdist_group`` in order; a command that stands alone in its own."""
    seen: set[str] = set()
    chained, alone = [], []
    for cmd in sorted(doc_commands(), key=_rank):
        if cmd.text in seen:
            continue
        seen.add(cmd.text)
        chain = _chain(cmd.text)
        marks = [pytest.mark.xdist_group(f"doc-{chain or f'{cmd.doc}:{cmd.line}'}")]
        if cmd.text in REMOTE:
            marks.append(pytest.mark.skip(reason=f"not run here: {REMOTE[cmd.text]}"))
        param = pytest.param(cmd, chain, id=f"{cmd.doc}:{cmd.line}", marks=marks)
        (chained if chain else alone).append((chain or "", param))
    order = {"probe": 0, "record": 1, "fleet": 2, "default-ports": 3}
    chained.sort(key=lambda cp: order[cp[0]])  # stable: document order inside a chain
    return [p for _, p in chained] + [p for _, p in alone]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory) -> dict[str, Path]:
    """One working folder per chain (a command standing alone gets its own)."""
    return {}


def _workdir(workdirs: dict[str, Path], tmp_path_factory, key: str) -> Path:
    if key not in workdirs:
        work = tmp_path_factory.mktemp("work")
        (work / "prompts.jsonl").write_text(  # the --dataset example's file (docs/probe.md)
            '{"prompt": "Say hello in five words."}\n'
            '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16}\n')
        workdirs[key] = work
    return workdirs[key]


def test_every_command_is_run_or_listed():
    """Every command of the documents is a test below; only ``REMOTE`` is not run."""
    params = _params()
    assert {p.values[0].text for p in params} == {c.text for c in doc_commands()}
    skipped = {p.values[0].text for p in params
               if any(m.name == "skip" for m in p.marks)}
    assert skipped == set(REMOTE)


@pytest.mark.parametrize(("cmd", "chain"), _params())
def test_documented_command_runs(cmd: DocCommand, chain: str | None, demo, request,
                                 workdirs, tmp_path_factory, tmp_path):
    if shlex.split(cmd.text)[1:3] == ["demo", "fleet"]:
        why = _fleet_binary_missing()
        if why:
            pytest.skip(f"{cmd}: {why}")
    fleet = request.getfixturevalue("fleet") if chain == "fleet" else None
    work = _workdir(workdirs, tmp_path_factory, chain or str(cmd))
    text = _substitute(cmd.text, demo, fleet, work)
    if text is None:
        pytest.skip(f"{cmd}: no prometheus binary (bash scripts/fleet_servers.sh)")
    words = shlex.split(text)
    if len(words) > 1 and words[1] in CHECKED:
        why = _check_tune(words)
    else:
        why = (_run_in_terminal(tmp_path, work, words) if _is_tui(words)
               else _run(work, words))
    assert not why, f"{cmd}\n  ran: {text}\n  {why}"
