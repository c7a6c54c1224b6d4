"""Where each engine's log is: from its process, container or pod, or as the user named it.

- ``find_logs(targets, log_paths, roots)``: each target with its location, the
  ``--log TARGET=PATH`` overrides applied, and a target named by address on this machine
  given the pid listening there (off the event loop: it may scan ``/proc``).
- ``find_log(target, roots)``: the target's ``LogLocation`` (or None: nothing to look at,
  a remote target with no ``log`` given). A log that exists but cannot be read is a location
  with ``error`` set, one line saying why and what to do.
- The order: the user's ``log`` (config, ``--log TARGET=PATH``: a path, or ``cmd:<command>``
  run without a shell); the container's log (Docker's json-file from ``config.v2.json``'s
  ``LogPath``, CRI's ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/<N>.log``, newest
  N; Podman's k8s-file from conmon's ``-l``); the process's stdout or stderr when it is a
  regular file (``/proc/<pid>/fd/1``, ``2``); its systemd unit's journal.
- ``pid_listening(port, roots)``: the process listening on a port of this machine (a target
  the user named by address), or None.
- ``note(target, location)``: the discovery note for a location that cannot be read:
  ``log of vllm@127.0.0.1:8000: /proc/4711/fd/1 is a terminal``.
- ``LogRoots``: the folders read (``/proc``, ``/var/lib/docker``, ``/var/log/pods``,
  Podman's storage) and the ``journalctl`` used, injectable for tests.

Nothing here raises: what cannot be read becomes the location's ``error``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from llmtop.config import Target
from llmtop.model import Container, LogLocation
from llmtop.sources import procnet
from llmtop.sources.logs.tail import newest_cri
from llmtop.urls import is_this_machine

__all__ = ["DEFAULT_ROOTS", "LogRoots", "find_log", "find_logs", "log_format", "note",
           "override_for", "pid_listening"]

_NO_ACCESS = "permission denied: run as root or join group adm/docker"
_SERVICE = re.compile(r"([^/]+\.service)$")


@dataclass(frozen=True, slots=True)
class LogRoots:
    """The folders and the command a search for logs reads."""

    proc: str = "/proc"
    docker: str = "/var/lib/docker"
    pods: str = "/var/log/pods"
    podman: str = "/var/lib/containers/storage"
    journalctl: str | None = "journalctl"
    """The journal's reader (found on ``PATH``); None: no journal on this machine."""

    def has_journal(self) -> bool:
        """True when ``journalctl`` can be run here."""
        return self.journalctl is not None and shutil.which(self.journalctl) is not None


DEFAULT_ROOTS = LogRoots()


def log_format(engine: str | None) -> str | None:
    """The line format of an engine's log (``parse.logs``): the engine's own id."""
    return engine


def override_for(target: Target, logs: tuple[tuple[str, str], ...]) -> str | None:
    """The ``--log TARGET=PATH`` value naming ``target`` (by name, ``host:port``, URL or
    ``:port``), or None."""
    port = f":{target.port}" if target.port is not None else None
    host_port = target.base_url.split("://", 1)[-1].rstrip("/")
    for spec, path in logs:
        s = spec.rstrip("/")
        bare = s.split("@", 1)[1] if "@" in s else s
        bare = bare.split("://", 1)[-1]
        if s == target.name or bare == host_port or (port is not None and s == port):
            return path
    return None


def note(target: str, where: LogLocation) -> str:
    """The one sentence said when ``where`` cannot be read."""
    return f"log of {target}: {where.error}"


def find_logs(targets: list[Target], log_paths: tuple[tuple[str, str], ...] = (),
              roots: LogRoots = DEFAULT_ROOTS) -> list[tuple[Target, LogLocation | None]]:
    """Each target (with its ``--log`` override and, named by address on this machine, the
    pid listening there) and where its log is."""
    out: list[tuple[Target, LogLocation | None]] = []
    listening: dict[int, set[int]] | None = None
    for t in targets:
        if t.log is None and log_paths:
            path = override_for(t, log_paths)
            if path is not None:
                t = dataclasses.replace(t, log=path)
        if (t.log is None and t.pid is None and t.container is None and t.port is not None
                and is_this_machine(t.host)):
            if listening is None:
                try:
                    listening = procnet.listening_sockets(roots.proc)
                except OSError:
                    listening = {}
            pids = listening.get(t.port, set()) - {os.getpid()}
            if pids:
                t = dataclasses.replace(t, pid=min(pids))
        out.append((t, find_log(t, roots)))
    return out


def find_log(target: Target, roots: LogRoots = DEFAULT_ROOTS) -> LogLocation | None:
    """Where ``target``'s log is (see the module docstring); None: nothing known to look at."""
    fmt = log_format(target.engine)
    if target.log:
        return configured(target.log, fmt)
    c = target.container
    pid = target.pid if target.pid is not None else (c.pid if c is not None else None)
    if c is not None and c.id:
        if c.runtime == "docker":
            return docker_log(c, fmt, roots)
        if c.pod or c.runtime in ("containerd", "cri-o"):
            found = cri_log(c, fmt, roots)
            if found is not None:
                return found
        if c.runtime == "podman":
            return podman_log(c, fmt, roots)
    if pid is None:
        return None
    return process_log(pid, fmt, roots)


def configured(spec: str, fmt: str | None) -> LogLocation:
    """The log the user named: a file, or ``cmd:<command>`` (its output is followed)."""
    if spec.startswith("cmd:"):
        cmd = spec[4:].strip()
        try:
            ok = bool(shlex.split(cmd))
        except ValueError as exc:
            return LogLocation(None, spec, error=f"{spec}: {exc}")
        if not ok:
            return LogLocation(None, spec, error=f"{spec}: no command")
        return LogLocation("command", cmd, path=cmd, fmt=fmt)
    path = os.path.expanduser(spec)
    return LogLocation("file", path, path=path, fmt=fmt)


# ---------------------------------------------------------------------- a plain process
def process_log(pid: int, fmt: str | None, roots: LogRoots) -> LogLocation:
    """The process's stdout (else stderr) when it is a regular file, else its systemd unit's
    journal, else why neither can be read."""
    why: str | None = None
    for fd in (1, 2):
        link = os.path.join(roots.proc, str(pid), "fd", str(fd))
        found, reason = _fd_file(link)
        if found is not None:
            return LogLocation("file", found, path=found, fmt=fmt, pid=pid)
        why = why or reason
    unit = _unit_of(pid, roots.proc)
    if unit is not None and roots.has_journal():
        return LogLocation("journal", f"journal {unit}", fmt=fmt, unit=unit, pid=pid)
    if unit is not None and why is not None and "socket" in why:
        why = f"{why} (the journal of {unit}, and journalctl is not installed)"
    return LogLocation(None, f"pid {pid}", pid=pid,
                       error=why or f"/proc/{pid}/fd/1 could not be read")


def _fd_file(link: str) -> tuple[str | None, str | None]:
    """(the file an fd link names, when it is a regular file we can open; else why not)."""
    shown = link
    try:
        target = os.readlink(link)
    except PermissionError:
        return None, f"{shown}: {_NO_ACCESS}"
    except OSError:
        return None, f"{shown} could not be read (the process ended?)"
    if target.startswith("/dev/pts/") or target.startswith("/dev/tty") or target == "/dev/console":
        return None, f"{shown} is a terminal"
    if target.startswith("pipe:"):
        return None, f"{shown} is a pipe"
    if target.startswith("socket:"):
        return None, f"{shown} is a socket"
    if target == "/dev/null":
        return None, f"{shown} is /dev/null (the output is thrown away)"
    try:
        st = os.stat(link)
    except PermissionError:
        return None, f"{shown}: {_NO_ACCESS}"
    except OSError:
        return None, f"{shown} could not be read"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{shown} is not a regular file ({target})"
    # follow the named file (rotation is seen by its name); when it is deleted or outside
    # our view (another mount namespace), the fd link itself still reads it
    try:
        same = os.stat(target)
        if (same.st_dev, same.st_ino) == (st.st_dev, st.st_ino):
            return target, None
    except OSError:
        pass
    return link, None


def _unit_of(pid: int, proc_root: str) -> str | None:
    """The ``.service`` a process's cgroup names (systemd), or None."""
    try:
        text = Path(proc_root, str(pid), "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        m = _SERVICE.search(path.rstrip("/"))
        if m:
            return m.group(1)
    return None


def pid_listening(port: int | None, roots: LogRoots = DEFAULT_ROOTS) -> int | None:
    """The lowest pid listening on ``port`` here (a forked server's parent), or None."""
    if port is None:
        return None
    try:
        pids = procnet.listening_sockets(roots.proc).get(port)
    except OSError:
        return None
    return min(pids) if pids else None


# ---------------------------------------------------------------------- containers
def docker_log(c: Container, fmt: str | None, roots: LogRoots) -> LogLocation:
    """Docker's json-file for container ``c`` (``config.v2.json``'s ``LogPath``)."""
    assert c.id is not None
    label = f"docker {c.name or c.id[:12]}"
    folder = os.path.join(roots.docker, "containers", c.id)
    default = os.path.join(folder, f"{c.id}-json.log")
    try:
        obj = json.loads(Path(folder, "config.v2.json").read_text(encoding="utf-8"))
    except PermissionError:
        return LogLocation(None, label, error=f"{folder}: {_NO_ACCESS}")
    except FileNotFoundError:
        if os.path.exists(default):
            return LogLocation("docker", label, path=default, fmt=fmt, pid=c.pid)
        return LogLocation(None, label, error=f"{folder} not found (Docker keeps its logs "
                           "elsewhere here: give the log with --log)")
    except (OSError, ValueError):
        obj = {}
    if not isinstance(obj, dict):
        obj = {}
    cfg = obj.get("HostConfig", {}).get("LogConfig", {}) if isinstance(
        obj.get("HostConfig"), dict) else {}
    driver = cfg.get("Type") if isinstance(cfg, dict) else None
    if driver == "local":
        return LogLocation(None, label, error="Docker's local log driver keeps compressed "
                           "files that cannot be read as text: use the json-file driver, or "
                           "give the log with --log 'TARGET=cmd:docker logs -f NAME'")
    if driver not in (None, "", "json-file"):
        return LogLocation(None, label, error=f"Docker's {driver} log driver keeps no file "
                           "here: give the log with --log")
    path = obj.get("LogPath")
    path = path if isinstance(path, str) and path else default
    return LogLocation("docker", label, path=path, fmt=fmt, pid=c.pid)


def cri_log(c: Container, fmt: str | None, roots: LogRoots) -> LogLocation | None:
    """The pod container's newest ``<N>.log`` under ``/var/log/pods`` (None: no such pod)."""
    label = f"pod {c.namespace}/{c.pod}" if c.namespace else f"pod {c.pod or c.id}"
    try:
        entries = sorted(os.listdir(roots.pods))
    except PermissionError:
        return LogLocation(None, label, error=f"{roots.pods}: {_NO_ACCESS}")
    except OSError:
        return None
    prefix = f"{c.namespace}_{c.pod}_" if c.namespace and c.pod else None
    pods = [e for e in entries if prefix is not None and e.startswith(prefix)]
    if not pods:
        return None
    pod_dir = os.path.join(roots.pods, pods[-1])
    try:
        names = sorted(os.listdir(pod_dir))
    except PermissionError:
        return LogLocation(None, label, error=f"{pod_dir}: {_NO_ACCESS}")
    except OSError:
        return None
    if c.name and c.name in names:
        name = c.name
    elif len(names) == 1:
        name = names[0]
    else:
        return LogLocation(None, label, error=f"{pod_dir}: which of its containers "
                           f"({', '.join(names)}) is the engine is not known")
    folder = os.path.join(pod_dir, name)
    newest = newest_cri(folder)
    if newest is None:
        return LogLocation(None, label, error=f"{folder}: no log file yet")
    return LogLocation("cri", f"{label} {name}", path=newest, fmt=fmt, pid=c.pid)


def podman_log(c: Container, fmt: str | None, roots: LogRoots) -> LogLocation:
    """Podman's k8s-file: conmon's ``-l k8s-file:PATH`` (or ``--log-path``), else the
    rootful storage's ``ctr.log``; another driver says to give the log."""
    assert c.id is not None
    label = f"podman {c.name or c.id[:12]}"
    for pid in procnet.pids(roots.proc):
        argv = procnet.cmdline(pid, roots.proc)
        if not argv or os.path.basename(argv[0]) != "conmon" or c.id not in argv:
            continue
        for i, a in enumerate(argv[:-1]):
            if a in ("-l", "--log-path"):
                driver, _, path = argv[i + 1].rpartition(":")
                if driver in ("", "k8s-file"):
                    return LogLocation("cri", label, path=path, fmt=fmt, pid=c.pid)
                return LogLocation(None, label, error=f"Podman's {driver} log driver: give "
                                   "the log with --log")
    path = os.path.join(roots.podman, "overlay-containers", c.id, "userdata", "ctr.log")
    if os.path.exists(path):
        return LogLocation("cri", label, path=path, fmt=fmt, pid=c.pid)
    return LogLocation(None, label, error=f"{path} not found: give the log with --log")
