"""Engines in network namespaces, as containers and pods run them (as root, as CI does).

Two namespaces with veth pairs ("pods"), each running the demo engine with its launcher's
real command line (``llmtop demo serve --engines vllm --ports 8000 --host 0.0.0.0``), both on
port 8000; the second is published on a host port by a real ``docker-proxy`` (Debian's
docker.io, unpacked by scripts/real_netns/setup.sh, never run as a service). Then ``llmtop``
with no target: ``--once --json`` lists each engine once, healthy, with its namespace; the
TUI at 80x24 shows it; the same search as ``nobody`` reads what it can and says what it
could not. Every namespace and veth made here is deleted, even on failure.

Skipped unless LLMTOP_REAL_NETNS=1; skipped with the reason without root or ``ip``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.real_engine.servers import need_env

pytestmark = pytest.mark.real_engine

PROXY = Path(os.environ.get("LLMTOP_DOCKER_PROXY",
                            Path.home() / ".cache/llmtop/docker-proxy/usr/sbin/docker-proxy"))


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


@dataclass
class Pods:
    names: list[str]
    """The namespaces (``ip netns`` names)."""
    addrs: list[str]
    """Each namespace's address, reachable from the host over its veth."""
    host_port: int
    """The host port docker-proxy publishes the second one on."""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(path: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    for _ in range(300):
        if path.exists():
            return
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}")
        time.sleep(0.1)
    raise AssertionError(f"{what} did not start in 30 s")


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)


def _teardown(pods: Pods) -> None:
    """Processes, then namespaces, then any veth still there (a namespace goes with its last
    process, and takes its veth end with it); nothing of ours may be left."""
    _stop(pods.procs)
    for ns in pods.names:
        for pid in ip("netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        ip("netns", "del", ns, check=False)
    for _ in range(50):
        left = [v for v in pods.veths if ip("link", "show", v, check=False).returncode == 0]
        if not left:
            break
        for v in left:
            ip("link", "del", v, check=False)
        time.sleep(0.1)
    have = ip("netns", "list", check=False).stdout.split()
    links = ip("-o", "link", "show", check=False).stdout
    assert not [n for n in pods.names if n in have], have
    assert not [v for v in pods.veths if f" {v}@" in links or f" {v}:" in links], links


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    need_env("LLMTOP_REAL_NETNS", "1 runs it: namespaces, veths, demo engines, docker-proxy")
    if os.geteuid() != 0:
        pytest.skip("needs root: ip netns add and veth pairs (CI runs as root)")
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2's ip")
    if not PROXY.exists():
        pytest.skip(f"no docker-proxy at {PROXY}: run scripts/real_netns/setup.sh")
    n = os.getpid() % 1000
    have = ip("netns", "list", check=False).stdout
    while f"lt{n}a" in have or f"lt{n}b" in have:
        n = (n + 1) % 1000
    # short names: the row at 80 columns shows them whole ("netns lt123a")
    pods = Pods([f"lt{n}a", f"lt{n}b"], [f"10.251.{n % 250}.2", f"10.251.{n % 250}.6"],
                _free_port())
    tmp = tmp_path_factory.mktemp("netns")
    try:
        for i, (ns, addr) in enumerate(zip(pods.names, pods.addrs, strict=True)):
            host_end, ns_end = f"lt{n}h{'ab'[i]}", f"lt{n}c{'ab'[i]}"
            gw = addr.rsplit(".", 1)[0] + f".{int(addr.rsplit('.', 1)[1]) - 1}"
            ip("netns", "add", ns)
            pods.veths.append(host_end)
            ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            ip("link", "set", ns_end, "netns", ns)
            ip("addr", "add", f"{gw}/30", "dev", host_end)
            ip("link", "set", host_end, "up")
            ip("netns", "exec", ns, "ip", "addr", "add", f"{addr}/30", "dev", ns_end)
            ip("netns", "exec", ns, "ip", "link", "set", ns_end, "up")
            ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            ready = tmp / f"{ns}.ready"
            p = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-m", "llmtop", "demo", "serve",
                 "--engines", "vllm", "--ports", "8000", "--host", "0.0.0.0", "--quiet",
                 "--ready-file", str(ready)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            pods.procs.append(p)
            _wait_ready(ready, p, f"the demo engine in {ns}")
        # docker-proxy reports its start on fd 3 (moby proxy_linux.go): give it one
        proxy = subprocess.Popen(
            ["bash", "-c", 'exec "$@" 3>/dev/null', "docker-proxy", str(PROXY), "-proto",
             "tcp", "-host-ip", "127.0.0.1", "-host-port", str(pods.host_port),
             "-container-ip", pods.addrs[1], "-container-port", "8000"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pods.procs.append(proxy)
        import socket

        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", pods.host_port)) == 0:
                    break
            time.sleep(0.05)
        yield pods
    finally:
        _teardown(pods)


def _ours(doc: dict, pods: Pods) -> list[dict]:
    return [e for e in doc["engines"] if e["container"] is not None
            and (e["container"]["netns"] in pods.names
                 or any(a in e["target"] for a in pods.addrs)
                 or e["target"].endswith(f":{pods.host_port}"))]


def _once(*env_cmd: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``llmtop --once --json`` with no target. The search has 0.5 s; on a box loaded far
    past its cores (a load average of 40 on 2 cores, other sessions' tests) it can run out
    before /proc is read, and then finds nothing at all: that alone is tried again (twice),
    so the test judges what is found, not a race with the box's load."""
    env = dict(os.environ)
    if home is not None:
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home))
    for _ in range(3):
        run = subprocess.run([*env_cmd, sys.executable, "-m", "llmtop", "--once", "--json",
                              "--window", "1"], capture_output=True, text=True, timeout=120,
                             env=env)
        if "no inference engines found" not in run.stderr:
            break
    return run


def test_once_json_lists_each_engine_once_with_its_namespace(pods: Pods) -> None:
    run = _once()
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    mine = sorted(_ours(json.loads(run.stdout), pods), key=lambda e: e["target"])
    got = [(e["target"], e["engine"], e["state"], e["container"]) for e in mine]
    bare = {"runtime": None, "id": None, "name": None, "pod": None, "namespace": None}
    assert got == sorted([
        (f"vllm@{pods.addrs[0]}:8000", "vllm", "ok", {**bare, "netns": pods.names[0]}),
        # the second is published: scraped at the host port, not at its namespace address
        (f"vllm@127.0.0.1:{pods.host_port}", "vllm", "ok", {**bare, "netns": pods.names[1]}),
    ]), run.stdout
    assert all(e["model"] and e["running"] is not None for e in mine)


def test_the_tui_at_80x24_shows_where_each_runs(pods: Pods) -> None:
    from llmtop.config import Config
    from llmtop.ui.app import LlmtopApp
    from llmtop.ui.live import make_source
    from llmtop.ui.textshot import screen_lines

    async def go() -> list[str]:
        src, _ = make_source(Config())  # no TARGET: it searches, as `llmtop` does
        app = LlmtopApp(src, Config())
        lines: list[str] = []
        async with app.run_test(size=(80, 24)) as pilot:
            for _ in range(60):
                await pilot.pause(0.25)
                lines = screen_lines(app)
                text = "\n".join(lines)
                if all(f"netns {n}" in text for n in pods.names) and text.count(" ok ") >= 2:
                    break
        return lines

    lines = asyncio.run(go())
    text = "\n".join(lines)
    for ns in pods.names:
        rows = [ln for ln in lines if ln.lstrip().startswith(f"netns {ns} ")]
        assert len(rows) == 1 and " ok " in rows[0], text  # once, healthy


def test_without_root_reads_what_it_can_and_says_what_it_could_not(pods: Pods) -> None:
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="llmtop-nobody-"))  # pytest's tmp is root's alone
    home.chmod(0o755)
    try:
        _as_nobody(pods, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _as_nobody(pods: Pods, home: Path) -> None:
    who = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    probe = subprocess.run([*who, sys.executable, "-c", "import llmtop"], capture_output=True,
                           text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot run this checkout's Python: {probe.stderr.strip()[-200:]}")
    run = _once(*who, home=home)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.stdout.startswith("{"), run.stderr
    mine = sorted(_ours(json.loads(run.stdout), pods), key=lambda e: e["target"])
    # found by their command lines' port in their namespaces' tables (readable by all)
    assert sorted((e["target"], e["state"]) for e in mine) == sorted([
        (f"vllm@{pods.addrs[0]}:8000", "ok"), (f"vllm@127.0.0.1:{pods.host_port}", "ok")])
    assert all(e["container"]["netns"] is None for e in mine)  # its name needs root
    notes = [ln for ln in run.stderr.splitlines() if "other network namespaces" in ln]
    assert len(notes) == 1, run.stderr  # said once
    assert notes[0].startswith("llmtop: 2 engine processes in other network namespaces were "
                               "read without their sockets and namespace names")
    assert notes[0].endswith("run as root to see which namespace each is")


VLLM_VENV = Path(os.environ.get("LLMTOP_VLLM_VENV", Path.home() / ".cache/llmtop/vllm-venv"))
VLLM_MODEL = Path(os.environ.get("LLMTOP_VLLM_MODEL", Path.home() / ".cache/llmtop/tiny-llama"))


@pytest.fixture(scope="module")
def vllm_pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    """A real vLLM (CPU, the tiny model of scripts/real_vllm) in a namespace of its own,
    started with its launcher's real command line on 0.0.0.0:8000 (VLLM_HOST_IP: the
    namespace's address)."""
    need_env("LLMTOP_REAL_NETNS_VLLM", "1 runs it: a real vLLM CPU in a network namespace")
    if os.geteuid() != 0:
        pytest.skip("needs root: ip netns add and veth pairs (CI runs as root)")
    if not (VLLM_VENV / ".llmtop-ready").exists() or not VLLM_MODEL.exists():
        pytest.skip("no vLLM venv or tiny model: run scripts/real_vllm/setup.sh")
    n = (os.getpid() + 500) % 1000
    while f"lt{n}v" in ip("netns", "list", check=False).stdout:
        n = (n + 1) % 1000
    ns, addr, gw = f"lt{n}v", f"10.251.{n % 250}.10", f"10.251.{n % 250}.9"
    pod = Pods([ns], [addr], 0)
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    try:
        ip("netns", "add", ns)
        pod.veths.append(f"lt{n}hv")
        ip("link", "add", f"lt{n}hv", "type", "veth", "peer", "name", f"lt{n}cv")
        ip("link", "set", f"lt{n}cv", "netns", ns)
        ip("addr", "add", f"{gw}/30", "dev", f"lt{n}hv")
        ip("link", "set", f"lt{n}hv", "up")
        for cmd in (("ip", "addr", "add", f"{addr}/30", "dev", f"lt{n}cv"),
                    ("ip", "link", "set", f"lt{n}cv", "up"), ("ip", "link", "set", "lo", "up")):
            ip("netns", "exec", ns, *cmd)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_HOST_IP": addr}
        with open(log, "wb") as out:
            pod.procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, str(VLLM_VENV / "bin/python"), "-m",
                 "vllm.entrypoints.openai.api_server", "--model", str(VLLM_MODEL),
                 "--served-model-name", "tiny-llama", "--host", "0.0.0.0", "--port", "8000",
                 "--max-model-len", "1024", "--dtype", "float32", "--enforce-eager",
                 "--max-num-seqs", "4"], stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True))
        import httpx

        for _ in range(480):  # from the host, at the namespace's address
            if pod.procs[0].poll() is not None:
                raise AssertionError(f"vLLM exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"http://{addr}:8000/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            raise AssertionError(f"vLLM not healthy in 8 min: {log.read_text()[-2000:]}")
        yield pod
    finally:
        for p in pod.procs:  # vLLM's engine core is a child: end the whole session
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        _teardown(pod)


def test_a_real_vllm_in_a_namespace_is_found_with_no_target(vllm_pod: Pods) -> None:
    run = _once()
    assert run.returncode == 0, run.stderr
    mine = _ours(json.loads(run.stdout), vllm_pod)
    assert [(e["target"], e["engine"], e["state"], e["model"], e["container"]["netns"])
            for e in mine] == [(f"vllm@{vllm_pod.addrs[0]}:8000", "vllm", "ok", "tiny-llama",
                                vllm_pod.names[0])], run.stdout
