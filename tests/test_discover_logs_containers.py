"""Container and pod logs end to end (root): the stand-in engine in a network namespace of
its own (``tests.netns_helpers``), put in a cgroup shaped as Docker's and then as a
kubelet's, its output written by the test in Docker's json-file and in the CRI format at
their real locations under injected roots. Discovery finds it with no target, names its
container or pod, finds its log; the follower follows it through a rotation.

Skipped with the reason without root, ``ip``, or a writable cgroup v2 hierarchy.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtop.config import Config
from llmtop.discovery import containers, namespaces
from llmtop.discovery.logs import LogRoots, find_logs
from llmtop.discovery.search import _merge, process_candidates
from llmtop.model import LogLocation, RawLog
from llmtop.parse.logs import assembler
from llmtop.sources.logs import Follower
from tests.netns_helpers import engine_in_namespace, skip_reason

CID = "5e0c" * 16
POD_UID = "7a1f3c52-9d4e-4b8a-a6c1-0e2f4d6b8a10"
ARGV = ["-m", "vllm.entrypoints.openai.api_server", "--port", "8000"]


def _cgroup2() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (None: nowhere)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        bits = line.split()
        if len(bits) > 2 and bits[2] == "cgroup2" and os.access(bits[1], os.W_OK):
            return bits[1]
    return None


def _why_not() -> str | None:
    return skip_reason() or (None if _cgroup2() else "no writable cgroup v2 hierarchy here")


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


@contextlib.contextmanager
def in_cgroup(pid: int, rel: str) -> Iterator[None]:
    """``pid`` moved into the cgroup ``rel`` (made here), and back to where it was after."""
    root = _cgroup2()
    assert root is not None
    was = next(ln.split(":", 2)[2] for ln in Path(f"/proc/{pid}/cgroup").read_text()
               .splitlines() if ln.startswith("0::"))
    made: list[Path] = []
    path = Path(root)
    for part in rel.strip("/").split("/"):
        path = path / part
        if not path.exists():
            path.mkdir()
            made.append(path)
    try:
        (path / "cgroup.procs").write_text(str(pid))
        yield
    finally:
        with contextlib.suppress(OSError):
            (Path(root + was) / "cgroup.procs").write_text(str(pid))
        for p in reversed(made):
            with contextlib.suppress(OSError):
                p.rmdir()


def _names_under(monkeypatch: pytest.MonkeyPatch, tmp: Path) -> None:
    """The container names read from the injected roots, not the machine's."""
    monkeypatch.setattr(namespaces.containers, "Names", functools.partial(
        containers.Names, pods_dir=str(tmp / "pods"), containers_dir=str(tmp / "none"),
        docker_dir=str(tmp / "docker" / "containers")))


def _found(tmp: Path, ns_name: str) -> tuple[str, LogLocation | None, object]:
    cands = [c for c in process_candidates("/proc", "127.0.0.1")
             if c.container is not None and c.container.netns == ns_name]
    (target,) = _merge(cands, Config())
    ((t, where),) = find_logs([target], (), LogRoots(docker=str(tmp / "docker"),
                                                      pods=str(tmp / "pods"), journalctl=None))
    return t.name, where, t.container


def _follow_until(f: Follower, text: str, timeout: float = 10.0) -> list[RawLog]:
    got: list[RawLog] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        f.poll()
        got += f.drain()
        if any(text in " ".join(e.lines) for r in got for e in r.events):
            return got
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not followed: {got}")


def _docker_line(text: str, n: int) -> str:
    # Docker's json-file driver: one object per line (docs.docker.com "JSON File logging driver")
    return json.dumps({"log": text + "\n", "stream": "stdout",
                       "time": f"2026-12-07T03:12:{n:02d}.123456789Z"}) + "\n"


def _cri_line(text: str, n: int) -> str:
    # CRI: "<RFC 3339 nano time> <stream> <P|F> <text>" (the kubelet's CRI logging format)
    return f"2026-12-07T03:12:{n:02d}.123456789Z stdout F {text}\n"


def test_a_docker_container_is_found_named_and_followed_through_a_rotation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docker" / "containers" / CID
    folder.mkdir(parents=True)
    log = folder / f"{CID}-json.log"
    (folder / "config.v2.json").write_text(json.dumps({
        "Name": "/vllm-a", "LogPath": str(log),
        "HostConfig": {"LogConfig": {"Type": "json-file", "Config": {"max-size": "10m"}}}}))
    log.write_text(_docker_line("INFO engine starting", 1))
    _names_under(monkeypatch, tmp_path)
    with engine_in_namespace(ARGV) as ns, in_cgroup(ns.pid, f"/docker/{CID}"):
        name, where, container = _found(tmp_path, ns.name)
    assert container.runtime == "docker" and container.name == "vllm-a"  # type: ignore
    assert where == LogLocation("docker", "docker vllm-a", path=str(log), fmt="vllm",
                                pid=ns.pid)
    f = Follower(assembler, thread=False)
    f.follow(name, where)
    _follow_until(f, "engine starting")
    with open(log, "a") as out:
        out.write(_docker_line("INFO before the rotation", 2))
    os.rename(log, folder / f"{CID}-json.log.1")  # max-size reached: Docker's rotation
    log.write_text(_docker_line("ERROR after the rotation", 3))
    got = _follow_until(f, "after the rotation")
    texts = [" ".join(e.lines) for r in got for e in r.events]
    assert any("before the rotation" in t for t in texts)
    assert any(r.rotated for r in got) and all(r.target == name for r in got)
    f.close()


def test_a_pod_container_is_found_named_and_followed_through_a_rotation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "pods" / f"prod_vllm-0_{POD_UID}" / "vllm"
    folder.mkdir(parents=True)
    zero = folder / "0.log"
    zero.write_text(_cri_line("INFO engine starting", 1))
    _names_under(monkeypatch, tmp_path)
    # the kubelet's cgroupfs layout: /kubepods/<qos>/pod<uid>/<container id>
    with engine_in_namespace(ARGV) as ns, in_cgroup(
            ns.pid, f"/kubepods/besteffort/pod{POD_UID}/{CID}"):
        name, where, container = _found(tmp_path, ns.name)
    assert (container.pod, container.namespace, container.name) == (  # type: ignore
        "vllm-0", "prod", "vllm")
    assert where == LogLocation("cri", "pod prod/vllm-0 vllm", path=str(zero), fmt="vllm",
                                pid=ns.pid)
    f = Follower(assembler, thread=False)
    f.follow(name, where)
    _follow_until(f, "engine starting")
    os.rename(zero, folder / "0.log.20261207-031205")  # the kubelet's rotation
    zero.write_text(_cri_line("ERROR after the rotation", 5))
    got = _follow_until(f, "after the rotation")
    assert any(r.rotated for r in got)
    f.close()
