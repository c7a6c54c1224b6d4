"""Finding each engine's log on fake trees: /proc/<pid>/fd, the systemd unit's journal,
Docker's json-file, a pod's CRI file, Podman's k8s-file, the user's ``log``; what cannot be
read says why; discovery hands each target its pid."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from test_discover_netns import HOST_NS, NS_A, _pid, host_proc, pod

from llmtop.config import Config, Target
from llmtop.discovery import logs
from llmtop.discovery.logs import LogRoots, find_log, note, override_for
from llmtop.discovery.search import _merge, process_candidates
from llmtop.model import Container, LogLocation
from llmtop.sources import procnet
from llmtop.targets import make_target

CID = "3f1b0c9d2e4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c"


def _roots(tmp_path: Path, *, journal: bool = False) -> LogRoots:
    return LogRoots(proc=str(tmp_path / "proc"), docker=str(tmp_path / "docker"),
                    pods=str(tmp_path / "pods"), podman=str(tmp_path / "podman"),
                    journalctl=sys.executable if journal else None)


def _proc(tmp_path: Path, pid: int, fd1: str, fd2: str | None = None,
          cgroup: str = "0::/user.slice/session-3.scope\n") -> None:
    d = tmp_path / "proc" / str(pid)
    (d / "fd").mkdir(parents=True)
    os.symlink(fd1, d / "fd" / "1")
    os.symlink(fd2 or fd1, d / "fd" / "2")
    (d / "cgroup").write_text(cgroup)


def _vllm(pid: int | None = 4711, **kw: object) -> Target:
    t = make_target("127.0.0.1", 8000, engine="vllm")
    return Target(**{**{f: getattr(t, f) for f in t.__dataclass_fields__}, "pid": pid, **kw})


def test_stdout_to_a_file_is_followed_by_its_name(tmp_path: Path) -> None:
    out = tmp_path / "server.log"
    out.write_text("")
    _proc(tmp_path, 4711, str(out))
    got = find_log(_vllm(), _roots(tmp_path))
    assert got == LogLocation("file", str(out), path=str(out), fmt="vllm", pid=4711)


def test_stderr_when_stdout_is_not_a_file(tmp_path: Path) -> None:
    err = tmp_path / "err.log"
    err.write_text("")
    _proc(tmp_path, 4711, "/dev/null", str(err))
    assert find_log(_vllm(), _roots(tmp_path)).path == str(err)  # type: ignore[union-attr]


@pytest.mark.parametrize(("link", "why"), [
    ("/dev/pts/3", "is a terminal"),
    ("pipe:[81234]", "is a pipe"),
    ("/dev/null", "is /dev/null (the output is thrown away)"),
])
def test_what_cannot_be_followed_says_why_once(tmp_path: Path, link: str, why: str) -> None:
    _proc(tmp_path, 4711, link)
    got = find_log(_vllm(), _roots(tmp_path))
    assert got is not None and got.kind is None
    assert got.error == f"{tmp_path}/proc/4711/fd/1 {why}"
    assert note("vllm@127.0.0.1:8000", got) == f"log of vllm@127.0.0.1:8000: {got.error}"


def test_another_users_process_says_to_run_as_root(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _proc(tmp_path, 4711, "/dev/pts/1")

    def denied(path: object) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "readlink", denied)
    got = find_log(_vllm(), _roots(tmp_path))
    assert got is not None and got.error == (
        f"{tmp_path}/proc/4711/fd/1: permission denied: run as root or join group adm/docker")


def test_a_dangling_fd_link_is_said_not_followed(tmp_path: Path) -> None:
    out = tmp_path / "gone.log"
    out.write_text("")
    _proc(tmp_path, 4711, str(out))
    out.unlink()
    (tmp_path / "elsewhere").write_text("")  # the link now dangles: not a file we can read
    got = find_log(_vllm(), _roots(tmp_path))
    assert got is not None and got.kind is None and "could not be read" in (got.error or "")


def test_a_systemd_unit_is_read_from_the_journal(tmp_path: Path) -> None:
    _proc(tmp_path, 4711, "socket:[5512]", cgroup="0::/system.slice/vllm.service\n")
    got = find_log(_vllm(), _roots(tmp_path, journal=True))
    assert got == LogLocation("journal", "journal vllm.service", fmt="vllm",
                              unit="vllm.service", pid=4711)
    without = find_log(_vllm(), _roots(tmp_path, journal=False))
    assert without is not None and without.error == (
        f"{tmp_path}/proc/4711/fd/1 is a socket (the journal of vllm.service, and journalctl "
        "is not installed)")


def _docker(tmp_path: Path, driver: str = "json-file", log_path: bool = True) -> Path:
    folder = tmp_path / "docker" / "containers" / CID
    folder.mkdir(parents=True)
    path = folder / f"{CID}-json.log"
    path.write_text("")
    cfg = {"Name": "/vllm-a", "HostConfig": {"LogConfig": {"Type": driver, "Config": {}}}}
    if log_path:
        cfg["LogPath"] = str(path)
    (folder / "config.v2.json").write_text(json.dumps(cfg))
    return path


def test_a_docker_container_is_read_from_its_json_file(tmp_path: Path) -> None:
    path = _docker(tmp_path)
    c = Container(runtime="docker", id=CID, name="vllm-a", pid=4711)
    got = find_log(_vllm(None, container=c), _roots(tmp_path))
    assert got == LogLocation("docker", "docker vllm-a", path=str(path), fmt="vllm", pid=4711)


def test_docker_without_log_path_uses_the_default_name(tmp_path: Path) -> None:
    path = _docker(tmp_path, log_path=False)
    c = Container(runtime="docker", id=CID, pid=4711)
    got = find_log(_vllm(None, container=c), _roots(tmp_path))
    assert got is not None and got.path == str(path) and got.label == f"docker {CID[:12]}"


def test_dockers_local_driver_says_it_cannot_be_read(tmp_path: Path) -> None:
    _docker(tmp_path, driver="local")
    got = find_log(_vllm(None, container=Container(runtime="docker", id=CID, name="v")),
                   _roots(tmp_path))
    assert got is not None and got.kind is None
    assert got.error is not None and got.error.startswith(
        "Docker's local log driver keeps compressed files that cannot be read as text")


def test_a_pod_is_read_from_its_newest_cri_file(tmp_path: Path) -> None:
    folder = tmp_path / "pods" / "prod_vllm-0_5f3c0e4e-uid" / "vllm"
    folder.mkdir(parents=True)
    for n in ("0.log", "0.log.20261207-031204", "1.log"):
        (folder / n).write_text("")
    (tmp_path / "pods" / "prod_vllm-0_5f3c0e4e-uid" / "sidecar").mkdir()
    c = Container(runtime="containerd", id=CID, name="vllm", pod="vllm-0", namespace="prod")
    got = find_log(_vllm(None, container=c), _roots(tmp_path))
    assert got == LogLocation("cri", "pod prod/vllm-0 vllm", path=str(folder / "1.log"),
                              fmt="vllm")
    nameless = Container(runtime="containerd", id=CID, pod="vllm-0", namespace="prod")
    got = find_log(_vllm(None, container=nameless), _roots(tmp_path))
    assert got is not None and got.error is not None and "sidecar, vllm" in got.error


def test_podman_k8s_file_from_conmon(tmp_path: Path) -> None:
    ctr = tmp_path / "ctr.log"
    ctr.write_text("")
    d = tmp_path / "proc" / "900"
    d.mkdir(parents=True)
    # conmon's command line as Podman starts it (libpod/oci_conmon_common.go: -c, -n, -l)
    argv = ["/usr/bin/conmon", "--api-version", "1", "-c", CID, "-u", CID, "-n", "vllm-p",
            "-l", f"k8s-file:{ctr}", "--log-level", "warning"]
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    c = Container(runtime="podman", id=CID, name="vllm-p")
    got = find_log(_vllm(None, container=c), _roots(tmp_path))
    assert got == LogLocation("cri", "podman vllm-p", path=str(ctr), fmt="vllm")


def test_the_users_log_overrides_everything(tmp_path: Path) -> None:
    _proc(tmp_path, 4711, "/dev/pts/1")
    got = find_log(_vllm(log="~/vllm.log"), _roots(tmp_path))
    assert got is not None and got.kind == "file" and got.path == os.path.expanduser(
        "~/vllm.log")
    cmd = find_log(_vllm(log="cmd:kubectl logs -f vllm-0"), _roots(tmp_path))
    assert cmd == LogLocation("command", "kubectl logs -f vllm-0",
                              path="kubectl logs -f vllm-0", fmt="vllm")
    bad = find_log(_vllm(log="cmd:'unclosed"), _roots(tmp_path))
    assert bad is not None and bad.kind is None and bad.error is not None


def test_a_remote_target_without_a_log_has_nothing_to_look_at(tmp_path: Path) -> None:
    assert find_log(_vllm(None), _roots(tmp_path)) is None


def test_log_overrides_name_a_target_by_name_address_or_port() -> None:
    t = make_target("127.0.0.1", 8000, engine="vllm")
    for spec in ("vllm@127.0.0.1:8000", "127.0.0.1:8000", "http://127.0.0.1:8000", ":8000"):
        assert override_for(t, ((spec, "/x.log"),)) == "/x.log", spec
    assert override_for(t, ((":8001", "/x.log"),)) is None


def test_discovery_hands_each_target_its_pid(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(procnet, "netns_names", lambda *a: {NS_A: "blue"})
    root = host_proc(tmp_path)  # 127.0.0.1:18819 listens, socket inode 900
    _pid(root, 400, ["python3", "-m", "vllm.entrypoints.openai.api_server", "--port",
                     "18819"], ns=HOST_NS, inodes=(900,))
    pod(root, 500, NS_A, "10.243.1.2", 501)
    cands = process_candidates(root, "127.0.0.1")
    assert sorted((c.port, c.pid) for c in cands) == [(8000, None), (18819, 400)]
    targets = {t.name: t.pid for t in _merge(cands, Config())}
    assert targets == {"vllm@10.243.1.2:8000": 500, "vllm@127.0.0.1:18819": 400}
    assert logs.pid_listening(18819, LogRoots(proc=str(root))) == 400


def test_find_logs_applies_overrides_and_finds_a_named_targets_pid(tmp_path: Path,
                                                                   monkeypatch) -> None:
    out = tmp_path / "server.log"
    out.write_text("")
    _proc(tmp_path, 4711, str(out))
    monkeypatch.setattr(procnet, "listening_sockets", lambda root: {8000: {4712, 4711}})
    named = make_target("127.0.0.1", 8000, engine="vllm")
    other = make_target("127.0.0.1", 9000, engine="sglang")
    remote = make_target("192.0.2.7", 8000, engine="vllm")
    got = logs.find_logs([named, other, remote], ((":9000", "/var/log/sglang.log"),),
                         _roots(tmp_path))
    assert [(t.pid, w.path if w else None) for t, w in got] == [
        (4711, str(out)), (None, "/var/log/sglang.log"), (None, None)]
