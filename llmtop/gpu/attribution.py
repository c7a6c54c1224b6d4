"""Attribute GPU processes to monitored engine targets (fills ``GpuProcess.engine_target``).

Rules, in order; the first that decides wins, and an ambiguous answer leaves None:

1. **Socket + parent chain.** For each target on this host (loopback, ``localhost`` or this
   hostname) the pid(s) listening on its port are found from ``/proc/net/tcp{,6}`` and the
   socket inodes in ``/proc/<pid>/fd``; for an engine discovery found in a container or pod
   (another network namespace) its process is the one discovery saw (``Container.pid``).
   A GPU process belongs to the target when it or its
   nearest listening ancestor listens on that port (vLLM's ``VLLM::EngineCore`` is a child
   of the API server). Two targets at the same nearest level -> None.
2. **Engine root.** When no ancestor listens (TGI: shards and router are siblings under
   ``text-generation-launcher``), the nearest ancestor with an engine title whose subtree
   holds exactly one target's listener decides.
3. **Title only.** When a target's port is listening but its owner cannot be read (another
   user's process, no privileges), a GPU process whose title names the target's engine is
   attributed only if there is exactly one such target and exactly one such engine
   instance among the unattributed GPU processes.

/proc reads are cached per call; the listener pid for a socket inode is cached across calls
and revalidated with one ``readlink``, so a steady state costs a few small reads per tick.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence

from llmtop.config import Target
from llmtop.gpu import proc as procfs
from llmtop.model import GpuProcess
from llmtop.sources import procnet
from llmtop.urls import host_port, is_this_machine

__all__ = ["Attributor", "attribute", "engine_of", "is_local_host", "target_port"]

_MAX_DEPTH = 64

# (engine id, argv[0] basenames, substrings of the whole command line / title)
_TITLES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("vllm", ("vllm",), ("VLLM::EngineCore", "VLLM::Worker", "vllm.entrypoints", "VLLM::")),
    (
        "sglang",
        (),
        ("sglang::scheduler", "sglang::detokenizer", "sglang.launch_server", "sglang::"),
    ),
    ("triton", ("tritonserver",), ()),
    ("trtllm", ("trtllm-serve",), ()),
    (
        "tgi",
        ("text-generation-launcher", "text-generation-router", "text-generation-server"),
        (),
    ),
    ("llamacpp", ("llama-server",), ()),
    ("ollama", ("ollama",), ()),
    ("lmdeploy", ("lmdeploy",), ("lmdeploy.serve", "lmdeploy serve")),
)


def engine_of(argv: Sequence[str] | None, comm: str | None = None) -> str | None:
    """Engine id named by a process title / command line, or None.

    ``argv`` is ``/proc/<pid>/cmdline`` split on NULs; ``comm`` the kernel name.
    """
    words: list[str] = []
    if argv:
        words.append(os.path.basename(argv[0].split(" ", 1)[0]))
        words.extend(os.path.basename(a) for a in argv[1:3])
    if comm:
        words.append(comm)
    line = " ".join(argv) if argv else (comm or "")
    for engine, bases, subs in _TITLES:
        if any(w in bases for w in words) or any(s in line for s in subs):
            return engine
    return None


@functools.lru_cache(maxsize=64)
def _own_address(ip: str) -> bool:
    """True when ``ip`` is an address of this machine (binding to it works; no traffic)."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(ip).version == 6 else socket.AF_INET
    except ValueError:
        return False
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((ip, 0))
        return True
    except OSError:
        return False


def is_local_host(host: str, hostname: str | None = None) -> bool:
    """True for loopback names/addresses, this machine's hostname and its own IP addresses."""
    h = (host or "").strip().strip("[]").lower()
    if not h or is_this_machine(h):
        return True
    me = (hostname if hostname is not None else socket.gethostname()).lower()
    if me and (h == me or h.split(".", 1)[0] == me.split(".", 1)[0] == h):
        return True
    return _own_address(h)


def target_port(t: Target) -> int | None:
    """The target's TCP port (explicit, from the URL, or the scheme's default)."""
    if t.port:
        return t.port
    got = host_port(t.base_url)
    return got[1] if got is not None else None


class _Scan:
    """Per-call cache of /proc reads."""

    def __init__(self, proc: str):
        self.proc = proc
        self._ppid: dict[int, int | None] = {}
        self._engine: dict[int, str | None] = {}

    def ppid(self, pid: int) -> int | None:
        if pid not in self._ppid:
            self._ppid[pid] = procfs.read_ppid(pid, self.proc)
        return self._ppid[pid]

    def chain(self, pid: int) -> list[int]:
        out: list[int] = []
        cur: int | None = pid
        while cur and cur > 0 and len(out) < _MAX_DEPTH and cur not in out:
            out.append(cur)
            if cur == 1:
                break
            cur = self.ppid(cur)
        return out

    def engine(self, pid: int) -> str | None:
        if pid not in self._engine:
            self._engine[pid] = engine_of(
                procfs.read_cmdline(pid, self.proc), procfs.read_comm(pid, self.proc)
            )
        return self._engine[pid]


class Attributor:
    """Attribution with cross-call caches (one per sampler).

    A port's listener is remembered as (socket inode, pid, fd) and revalidated each call with
    one ``readlink``; /proc/net/tcp (slow to read on busy hosts) and the ``/proc/*/fd`` scan
    run only when something changed, or at most every ``rescan_s`` for a port that is down
    or whose owner cannot be read.
    """

    def __init__(
        self,
        *,
        proc: str = procfs.PROC,
        hostname: str | None = None,
        rescan_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.proc = proc
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self.rescan_s = rescan_s
        self._clock = clock
        self._owner: dict[int, list[tuple[int, str]]] = {}  # inode -> [(pid, fd), ...]
        self._state: dict[int, tuple[set[int], set[int]]] = {}  # port -> (inodes, pids)
        self._table_at: float | None = None
        self.scans = 0
        """How many times /proc/net/tcp was read (tests and benchmarks look)."""

    def _valid(self, inode: int) -> bool:
        held = self._owner.get(inode)
        if not held:
            return False
        want = f"socket:[{inode}]"
        for pid, fd in held:
            try:
                if os.readlink(f"{self.proc}/{pid}/fd/{fd}") != want:
                    return False
            except OSError:
                return False
        return True

    def _remember(self, inode: int, pids: set[int]) -> None:
        want = f"socket:[{inode}]"
        held: list[tuple[int, str]] = []
        for pid in pids:
            fd_dir = f"{self.proc}/{pid}/fd"
            try:
                for fd in os.listdir(fd_dir):
                    if os.readlink(f"{fd_dir}/{fd}") == want:
                        held.append((pid, fd))
                        break
            except OSError:
                continue
        if len(held) == len(pids):
            self._owner[inode] = held

    def _rescan(self, ports: set[int]) -> None:
        self.scans += 1
        by_port: dict[int, set[int]] = {}
        for inode, sock in procnet.listen_table(self.proc).items():
            if sock.port in ports:
                by_port.setdefault(sock.port, set()).add(inode)
        owners: dict[int, set[int]] = {}
        missing: set[int] = set()
        for inodes in by_port.values():
            for inode in inodes:
                if self._valid(inode):
                    owners[inode] = {pid for pid, _ in self._owner[inode]}
                else:
                    self._owner.pop(inode, None)
                    missing.add(inode)
        if missing:
            for pid in procnet.pids(self.proc):  # one fd scan for every unknown inode
                for inode in procnet.socket_inodes(pid, self.proc) & missing:
                    owners.setdefault(inode, set()).add(pid)
            for inode in missing & owners.keys():
                self._remember(inode, owners[inode])
        for port in ports:
            inodes = by_port.get(port, set())
            self._state[port] = (inodes, {pid for i in inodes for pid in owners.get(i, ())})

    def _resolve(self, ports: set[int]) -> dict[int, tuple[bool, set[int]]]:
        """``{port: (something listens, {owner pid, ...})}``."""
        now = self._clock()
        out: dict[int, tuple[bool, set[int]]] = {}
        stale: set[int] = set()
        force = False
        for port in ports:
            st = self._state.get(port)
            if st is None:
                stale.add(port)
                force = True
                continue
            inodes, pids = st
            if inodes and pids:
                if all(self._valid(i) for i in inodes):
                    out[port] = (True, pids)
                    continue
                force = True  # the listener went away or changed
            stale.add(port)
        if stale and (force or self._table_at is None or now - self._table_at >= self.rescan_s):
            self._table_at = now
            self._rescan(stale)
        for port in stale:
            inodes, pids = self._state.get(port, (set(), set()))
            out[port] = (bool(inodes), pids)
        return out

    def attribute(self, processes: Iterable[GpuProcess], targets: Iterable[Target]) -> None:
        """Set ``engine_target`` on the processes that can be attributed; never raises."""
        try:
            self._attribute(list(processes), list(targets))
        except Exception:  # attribution is best effort: a /proc race must not break a tick
            return

    def _attribute(self, processes: list[GpuProcess], targets: list[Target]) -> None:
        todo = [p for p in processes if p.pid and p.visible and p.engine_target is None]
        # engines discovery found in another network namespace: their process is known (NVML
        # reports host pids), their socket is not in this namespace's table
        in_ns = [(t, t.container.pid) for t in targets if t.container is not None
                 and t.container.pid and os.path.isdir(f"{self.proc}/{t.container.pid}")]
        local = [
            (t, port)
            for t in targets
            if (port := target_port(t)) and is_local_host(t.host, self.hostname)
            and not any(t is n for n, _ in in_ns)
        ]
        if not todo or not (local or in_ns):
            return
        scan = _Scan(self.proc)
        state = self._resolve({port for _, port in local}) if local else {}
        listeners: dict[int, set[str]] = {}
        for t, pid in in_ns:
            listeners.setdefault(pid, set()).add(t.name)
        unresolved: list[Target] = []  # a socket listens, but its owner could not be read
        for t, port in local:
            is_listening, pids = state[port]
            if is_listening and not pids:
                unresolved.append(t)
            for pid in pids:
                listeners.setdefault(pid, set()).add(t.name)
        listener_chains = {pid: scan.chain(pid) for pid in listeners}

        left: list[GpuProcess] = []
        for p in todo:
            assert p.pid is not None
            decided, name = self._by_socket(scan.chain(p.pid), listeners, listener_chains, scan)
            if decided:
                p.engine_target = name
            else:
                left.append(p)
        if left and unresolved:
            self._by_title(left, unresolved, scan)

    @staticmethod
    def _by_socket(
        chain: list[int],
        listeners: dict[int, set[str]],
        listener_chains: dict[int, list[int]],
        scan: _Scan,
    ) -> tuple[bool, str | None]:
        for node in chain:  # rule 1: nearest listening ancestor (or the process itself)
            names = listeners.get(node)
            if names:
                return True, (next(iter(names)) if len(names) == 1 else None)
        for node in chain:  # rule 2: nearest engine-titled ancestor with listeners below
            if scan.engine(node) is None:
                continue
            hits = {n for lp, ch in listener_chains.items() if node in ch for n in listeners[lp]}
            if hits:
                return True, (next(iter(hits)) if len(hits) == 1 else None)
        return False, None

    @staticmethod
    def _by_title(left: list[GpuProcess], unresolved: list[Target], scan: _Scan) -> None:
        # rule 3: one unresolved target of engine X and one instance (root) of engine X
        roots: dict[str, dict[int, list[GpuProcess]]] = {}
        for p in left:
            assert p.pid is not None
            root, eng = None, None
            for node in scan.chain(p.pid):
                e = scan.engine(node)
                if e is not None and (eng is None or e == eng):
                    root, eng = node, e
            if eng is not None and root is not None:
                roots.setdefault(eng, {}).setdefault(root, []).append(p)
        for eng, by_root in roots.items():
            cands = [t for t in unresolved if t.engine == eng]
            if len(cands) == 1 and len(by_root) == 1:
                for p in next(iter(by_root.values())):
                    p.engine_target = cands[0].name


def attribute(processes: Iterable[GpuProcess], targets: Iterable[Target]) -> None:
    """Fill ``GpuProcess.engine_target`` where it can be decided; leave None when ambiguous."""
    Attributor().attribute(processes, targets)
