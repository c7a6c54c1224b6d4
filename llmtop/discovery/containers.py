"""Which container, pod or network namespace a process runs in, in names an operator knows.

Read without any API, only from files the box keeps (``docs/discovery.md``)::

    parse_cgroup(text) -> CgroupId | None        /proc/<pid>/cgroup, v1 or v2
    Names(...).identify(pid, netns) -> Container
    docker_proxies(cmdlines) -> list[Published]  docker-proxy command lines
    conmon_names(cmdlines) -> {container id: name}  Podman's conmon ``-c ID -n NAME``

cgroup paths, by runtime (the id is the container's full id):

- Docker: ``/docker/<id>`` (cgroupfs), ``/system.slice/docker-<id>.scope`` (systemd)
- containerd (CRI): ``.../kubepods-<qos>-pod<uid_>.slice/cri-containerd-<id>.scope`` (systemd),
  ``/kubepods/<qos>/pod<uid>/<id>`` (cgroupfs)
- CRI-O: ``.../crio-<id>.scope`` (systemd), ``/kubepods/<qos>/pod<uid>/crio-<id>`` (cgroupfs)
- Podman: ``/machine.slice/libpod-<id>.scope`` (systemd; rootless under ``user.slice``),
  ``/libpod_parent/libpod-<id>`` (cgroupfs)

Names: a Kubernetes node's ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/`` and
``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``; Docker's
``/var/lib/docker/containers/<id>/config.v2.json`` (``Name``; root only); Podman's conmon
command line. What cannot be read stays None; nothing here raises.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from llmtop.model import Container

__all__ = ["CgroupId", "Names", "Published", "conmon_names", "docker_proxies", "parse_cgroup"]

_HEX = r"[0-9a-f]{12,64}"
_SCOPES = (  # (runtime, leaf segment pattern); conmon scopes are not the container
    ("docker", re.compile(rf"^docker-({_HEX})\.scope$")),
    ("containerd", re.compile(rf"^cri-containerd-({_HEX})\.scope$")),
    ("cri-o", re.compile(rf"^crio-({_HEX})(?:\.scope)?$")),
    ("podman", re.compile(rf"^libpod-(?:payload-)?({_HEX})(?:\.scope)?$")),
)
_BARE = re.compile(rf"^({_HEX})$")
_POD_SYSTEMD = re.compile(r"^kubepods(?:-[a-z]+)*-pod([0-9A-Za-z_]+)\.slice$")
_POD_CGROUPFS = re.compile(r"^pod([0-9A-Za-z-]+)$")


@dataclass(frozen=True, slots=True)
class CgroupId:
    """What one cgroup path says."""

    runtime: str | None
    id: str
    pod_uid: str | None = None


@dataclass(frozen=True, slots=True)
class Published:
    """A host port that forwards to a container's address and port (docker-proxy)."""

    host_ip: str
    host_port: int
    container_ip: str
    container_port: int


def _path_id(path: str) -> CgroupId | None:
    parts = [p for p in path.split("/") if p]
    pod = None
    for seg in parts:
        m = _POD_SYSTEMD.match(seg) or _POD_CGROUPFS.match(seg)
        if m:
            pod = m.group(1).replace("_", "-")
    for i in range(len(parts) - 1, -1, -1):
        seg = parts[i]
        for runtime, rx in _SCOPES:
            m = rx.match(seg)
            if m:
                return CgroupId(runtime, m.group(1), pod)
        m = _BARE.match(seg)
        if m and i > 0:
            parent = parts[i - 1]
            if parent == "docker":
                return CgroupId("docker", m.group(1), pod)
            if pod is not None:  # cgroupfs kubelet: containerd (or dockershim) under the pod
                return CgroupId("containerd", m.group(1), pod)
    return None


def parse_cgroup(text: str) -> CgroupId | None:
    """The container a ``/proc/<pid>/cgroup`` text names, or None (a host process). The
    unified (v2, ``0::``) line is read first, then the v1 lines in order."""
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    paths = [ln.split(":", 2)[2] for ln in lines if ln.startswith("0::") and ln.count(":") >= 2]
    paths += [ln.split(":", 2)[2] for ln in lines
              if not ln.startswith("0::") and ln.count(":") >= 2]
    for path in paths:
        found = _path_id(path)
        if found is not None:
            return found
    return None


def _flags(argv: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Go-style flags: ``-name value``, ``--name value``, ``-name=value``."""
    out: dict[str, str] = {}
    i = 1
    while i < len(argv):
        a = argv[i]
        if a.startswith("-"):
            key, eq, val = a.lstrip("-").partition("=")
            if eq:
                out[key] = val
            elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                out[key] = argv[i + 1]
                i += 1
            else:
                out[key] = ""
        i += 1
    return out


def docker_proxies(cmdlines: dict[int, list[str]]) -> list[Published]:
    """The TCP ports Docker publishes, from its ``docker-proxy -proto tcp -host-ip H
    -host-port P -container-ip C -container-port Q`` processes."""
    out: list[Published] = []
    for argv in cmdlines.values():
        if not argv or os.path.basename(argv[0]) != "docker-proxy":
            continue
        f = _flags(argv)
        if f.get("proto", "tcp") != "tcp":
            continue
        try:
            out.append(Published(f.get("host-ip") or "0.0.0.0", int(f["host-port"]),
                                 f["container-ip"], int(f["container-port"])))
        except (KeyError, ValueError):
            continue
    return out


def conmon_names(cmdlines: dict[int, list[str]]) -> dict[str, str]:
    """``{container id: name}`` from Podman's conmon (``conmon --api-version 1 -c ID ...
    -n NAME``)."""
    out: dict[str, str] = {}
    for argv in cmdlines.values():
        if not argv or os.path.basename(argv[0]) != "conmon":
            continue
        f = _flags(argv)
        cid, name = f.get("c") or f.get("cid"), f.get("n") or f.get("name")
        if cid and name:
            out[cid] = name
    return out


class Names:
    """Names the box keeps, read once per discovery (each folder at most once)."""

    def __init__(self, *, proc_root: str | os.PathLike[str] = "/proc",
                 pods_dir: str = "/var/log/pods", containers_dir: str = "/var/log/containers",
                 docker_dir: str = "/var/lib/docker/containers",
                 conmon: dict[str, str] | None = None,
                 netns: dict[int, str] | None = None) -> None:
        self.proc_root = proc_root
        self.pods_dir, self.containers_dir, self.docker_dir = pods_dir, containers_dir, docker_dir
        self.conmon = conmon or {}
        self.netns = netns or {}
        self._pods: dict[str, tuple[str, str, str]] | None = None
        self._logs: list[tuple[str, str, str, str]] | None = None
        self.unreadable: set[str] = set()
        """Folders or files that exist but could not be read (they need root)."""

    def pods(self) -> dict[str, tuple[str, str, str]]:
        """``{pod uid: (namespace, pod, folder)}`` from ``/var/log/pods``."""
        if self._pods is None:
            self._pods = {}
            for entry in self._listdir(self.pods_dir):
                bits = entry.split("_")
                if len(bits) == 3:
                    self._pods[bits[2]] = (bits[0], bits[1], entry)
        return self._pods

    def logs(self) -> list[tuple[str, str, str, str]]:
        """``[(pod, namespace, container, id)]`` from ``/var/log/containers`` symlinks."""
        if self._logs is None:
            self._logs = []
            for entry in self._listdir(self.containers_dir):
                stem = entry.removesuffix(".log")
                head, _, cid = stem.rpartition("-")
                bits = head.split("_", 2)
                if len(bits) == 3 and cid:
                    self._logs.append((bits[0], bits[1], bits[2], cid))
        return self._logs

    def _listdir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except PermissionError:
            self.unreadable.add(path)
        except OSError:
            pass
        return []

    def docker_name(self, cid: str) -> str | None:
        path = Path(self.docker_dir, cid, "config.v2.json")
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except PermissionError:
            self.unreadable.add(self.docker_dir)
            return None
        except (OSError, ValueError):
            return None
        name = obj.get("Name") if isinstance(obj, dict) else None
        return (name.lstrip("/") or None) if isinstance(name, str) else None

    def identify(self, pid: int, netns: int | None) -> Container:
        """The identity of ``pid`` (running in namespace ``netns``, None when unknown)."""
        ns = None if netns is None else self.netns.get(netns, str(netns))
        try:
            text = Path(self.proc_root, str(pid), "cgroup").read_text()
        except OSError:
            text = ""
        cg = parse_cgroup(text)
        if cg is None:
            return Container(netns=ns, pid=pid)
        c = Container(runtime=cg.runtime, id=cg.id, netns=ns, pid=pid)
        if cg.pod_uid is not None:
            pod = self.pods().get(cg.pod_uid)
            if pod is not None:
                c = replace(c, namespace=pod[0], pod=pod[1])
                c = replace(c, name=self._pod_container(cg.id, pod))
        elif cg.runtime == "docker":
            c = replace(c, name=self.docker_name(cg.id))
        elif cg.runtime == "podman":
            c = replace(c, name=self.conmon.get(cg.id))
        return c

    def _pod_container(self, cid: str, pod: tuple[str, str, str]) -> str | None:
        for pod_name, namespace, container, log_id in self.logs():
            if log_id == cid and pod_name == pod[1] and namespace == pod[0]:
                return container
        folders = self._listdir(os.path.join(self.pods_dir, pod[2]))
        return folders[0] if len(folders) == 1 else None
