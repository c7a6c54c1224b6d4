"""Container identity from cgroup paths (each runtime's documented or coded layout), a
Kubernetes node's pod folders, Docker's config, and docker-proxy / conmon command lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from llmtop.discovery import containers
from llmtop.discovery.containers import CgroupId, Names, Published, parse_cgroup

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "cgroup"
DOCKER = "ae836c95b4c3c9e9179e0e91015512da89fdec91612f63cebae57df9a5444c79"
CTRD = "1207db63eaeb133a85d2b614d12d95d4dff3f29af60d7a7b3c7d39abdf4bd119"
CRIO = "5c4ad0bd1a9b2f1c8e0d7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d"
PODMAN = "9f2c1a7e3b5d4c6a8e0f1b2d3c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60"
UID = "1234-abcd-5678-efgh"


def fixture(name: str) -> str:
    text = (FIX / name).read_text()
    assert text.startswith("# source: ")
    return text


@pytest.mark.parametrize(("name", "want"), [
    ("docker_v1_cgroupfs.txt", CgroupId("docker", DOCKER)),
    ("docker_v1_systemd.txt", CgroupId("docker", DOCKER)),
    ("docker_v2_cgroupfs.txt", CgroupId("docker", DOCKER)),
    ("docker_v2_systemd.txt", CgroupId("docker", DOCKER)),
    ("containerd_v2_systemd.txt", CgroupId("containerd", CTRD, UID)),
    ("containerd_v1_cgroupfs.txt", CgroupId("containerd", CTRD, UID)),
    ("crio_v2_systemd.txt", CgroupId("cri-o", CRIO, UID)),
    ("crio_v1_cgroupfs.txt", CgroupId("cri-o", CRIO, UID)),
    ("podman_v2_systemd.txt", CgroupId("podman", PODMAN)),
    ("podman_v2_rootless.txt", CgroupId("podman", PODMAN)),
    ("podman_v1_cgroupfs.txt", CgroupId("podman", PODMAN)),
    ("host_v1.txt", None),  # a host process (this machine's own cgroup file)
    ("crio_conmon_v2.txt", None),  # conmon's scope is not the container
])
def test_cgroup_layouts(name, want):
    assert parse_cgroup(fixture(name)) == want


def test_cgroup_garbage_is_no_container():
    for text in ("", "garbage", "0::", "0::/", "1:cpu:/docker/xyz", "\x00\xff"):
        assert parse_cgroup(text) is None


def _node(tmp: Path) -> Names:
    """A Kubernetes node's log folders (kubelet helpers.go / legacy.go layouts)."""
    pods, logs = tmp / "pods", tmp / "containers"
    (pods / f"prod_vllm-0_{UID}" / "vllm").mkdir(parents=True)
    (pods / f"prod_vllm-0_{UID}" / "sidecar").mkdir(parents=True)
    (pods / "other_x_1111-2222" / "only").mkdir(parents=True)
    logs.mkdir()
    for name in (f"vllm-0_prod_vllm-{CTRD}.log", f"vllm-0_prod_sidecar-{'f' * 64}.log"):
        os.symlink(pods / "x.log", logs / name)
    return Names(proc_root=tmp / "proc", pods_dir=str(pods), containers_dir=str(logs),
                 docker_dir=str(tmp / "docker"))


def _proc(tmp: Path, pid: int, cgroup_fixture: str) -> None:
    d = tmp / "proc" / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(fixture(cgroup_fixture))


def test_pod_folders_name_the_pod_and_its_container(tmp_path):
    names = _node(tmp_path)
    _proc(tmp_path, 10, "containerd_v2_systemd.txt")
    c = names.identify(10, 4026532178)
    assert (c.runtime, c.id, c.namespace, c.pod, c.name) == (
        "containerd", CTRD, "prod", "vllm-0", "vllm")
    assert c.netns == "4026532178" and c.pid == 10
    assert c.label == "pod prod/vllm-0"
    assert names.pods()["1111-2222"][:2] == ("other", "x")


def test_pod_without_container_logs_takes_its_only_folder(tmp_path):
    names = _node(tmp_path)
    (tmp_path / "pods" / f"prod_vllm-0_{UID}" / "sidecar").rmdir()
    _proc(tmp_path, 11, "crio_v2_systemd.txt")  # no /var/log/containers entry for it
    c = names.identify(11, None)
    assert (c.runtime, c.pod, c.name, c.netns) == ("cri-o", "vllm-0", "vllm", None)


def test_docker_name_from_its_config_and_unreadable_is_said(tmp_path, monkeypatch):
    names = _node(tmp_path)
    cfg = tmp_path / "docker" / DOCKER
    cfg.mkdir(parents=True)
    # the fields llmtop reads of moby's container config (config.v2.json: ID, Name)
    (cfg / "config.v2.json").write_text(json.dumps({"ID": DOCKER, "Name": "/vllm-a"}))
    _proc(tmp_path, 12, "docker_v2_systemd.txt")
    c = names.identify(12, 4026532999)
    assert (c.runtime, c.name, c.label) == ("docker", "vllm-a", "ctr vllm-a")
    assert names.unreadable == set()

    real = Path.read_text

    def closed(self, *a, **k):  # as /var/lib/docker is to a user without root
        if self.name == "config.v2.json":
            raise PermissionError(13, "Permission denied")
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", closed)
    c = names.identify(12, None)
    assert (c.runtime, c.id, c.name, c.label) == ("docker", DOCKER, None, "ctr ae836c95b4c3")
    assert str(tmp_path / "docker") in names.unreadable  # said: names need root


def test_podman_name_from_conmon():
    # podman libpod/oci_conmon_common.go sharedConmonArgs: --api-version 1 -c ID -u ID -r
    # RUNTIME -b BUNDLE -p PIDFILE -n NAME --exit-dir DIR --full-attach
    argv = ["/usr/bin/conmon", "--api-version", "1", "-c", PODMAN, "-u", PODMAN, "-r",
            "/usr/bin/crun", "-b", f"/var/lib/containers/storage/overlay-containers/{PODMAN}"
            "/userdata", "-p", "/run/containers/storage/pidfile", "-n", "vllm-b",
            "--exit-dir", "/run/libpod/exits", "--full-attach", "-s"]
    assert containers.conmon_names({5: argv, 6: ["/usr/bin/conmon"], 7: []}) == {
        PODMAN: "vllm-b"}


def test_docker_proxy_command_lines():
    # moby libnetwork/portmapper/proxy_linux.go newProxyCommand: the argv dockerd runs
    argv = ["/usr/sbin/docker-proxy", "-proto", "tcp", "-host-ip", "0.0.0.0", "-host-port",
            "8000", "-container-ip", "172.17.0.2", "-container-port", "8000"]
    udp = [*argv[:2], "udp", *argv[3:]]
    eq = ["/usr/bin/docker-proxy", "-proto=tcp", "-host-ip=127.0.0.1", "-host-port=18000",
          "-container-ip=10.88.0.5", "-container-port=8000", "-use-listen-fd"]
    bad = ["/usr/sbin/docker-proxy", "-proto", "tcp", "-host-port", "x"]
    got = containers.docker_proxies({1: argv, 2: udp, 3: eq, 4: bad, 5: ["python3"], 6: []})
    assert got == [Published("0.0.0.0", 8000, "172.17.0.2", 8000),
                   Published("127.0.0.1", 18000, "10.88.0.5", 8000)]
