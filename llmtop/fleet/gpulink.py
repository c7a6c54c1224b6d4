"""Link the fleet's DCGM GPUs to the engine rows they serve (sets ``GpuProcess.engine_target``).

Direct mode attributes GPU processes to engines by pid; a fleet has no pids, only DCGM
exporter series. ``link_gpus`` gives ``diagnose.gpus_by_target`` (hence ``gpu_throttle``,
the GPU screen's engine column and the JSON's ``engine_target``) the GPUs that really serve
each row, in two ways and no other:

1. **By pod** (exact): the DCGM Kubernetes pod mapping (``namespace``/``pod`` labels, or
   ``exported_*`` ones, the GPU's ``GpuProcess(name="ns/pod/container")``) names the row's
   ``pod`` label (and its ``namespace`` when both have one). Rows carry ``pod`` when the
   fleet groups by it (the default when engine series have ``pod``).
2. **By host**, only when unambiguous: the GPU's host (DCGM ``Hostname``, else the exporter
   target's host) is the host of the row's ``instance`` label, that host carries exactly
   one engine target among the fleet's rows, the GPU has no pod link (nor, when the rows
   carry pods, a consumer pod that is none of theirs), and the GPU holds at
   least ``HOST_LINK_MIN_USED_BYTES`` of memory (an engine preallocates its weights and KV
   cache; an empty GPU on the same machine serves nothing). Several engines on one host
   without a pod mapping: no link, since which GPU serves which engine is not knowable.

Rank rows share their row's ``target``, so they get the same GPUs. Pure: no I/O; one pass
over rows and GPUs (dicts by pod and host).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from llmtop.model import EngineRow, GpuProcess, GpuRecord

__all__ = ["HOST_LINK_MIN_USED_BYTES", "host_of", "link_gpus"]

HOST_LINK_MIN_USED_BYTES = 2**30
"""A host link needs the GPU to hold at least this much memory (when its use is known)."""


def host_of(instance: str) -> str:
    """``10.0.0.5:8000`` -> ``10.0.0.5``; ``[::1]:8000`` -> ``::1``; no port: as is; lower
    case (host names compare without case)."""
    if instance.startswith("["):
        end = instance.find("]")
        return (instance[1:end] if end > 0 else instance[1:]).lower()
    if instance.count(":") == 1:
        instance = instance.split(":", 1)[0]
    return instance.lower()


def _consumers(name: str) -> list[tuple[str | None, str]]:
    """Candidate ``(namespace, pod)`` of a DCGM process name, best first: the adapter
    writes ``namespace/pod/container`` leaving empty parts out."""
    parts = [p for p in name.split("/") if p]
    if len(parts) >= 3:
        return [(parts[0], parts[1])]
    if len(parts) == 2:
        return [(parts[0], parts[1]), (None, parts[0])]
    return [(None, parts[0])] if parts else []


class _Index:
    """The rows' targets by ``(namespace, pod)``, by pod, and by instance host."""

    def __init__(self, rows: Iterable[EngineRow]) -> None:
        self.ns_pod: dict[tuple[str, str], set[str]] = {}
        self.pod_any: dict[str, set[str]] = {}
        self.pod_bare: dict[str, set[str]] = {}
        self.host: dict[str, set[str]] = {}
        for r in rows:
            labels = r.labels or {}
            pod = labels.get("pod")
            if pod:
                ns = labels.get("namespace")
                if ns:
                    self.ns_pod.setdefault((ns, pod), set()).add(r.target)
                else:
                    self.pod_bare.setdefault(pod, set()).add(r.target)
                self.pod_any.setdefault(pod, set()).add(r.target)
            inst = labels.get("instance")
            if inst:
                self.host.setdefault(host_of(inst), set()).add(r.target)

    def by_pod(self, name: str) -> str | None:
        """The one target whose pod is the process ``name``'s consumer, else None."""
        for ns, pod in _consumers(name):
            if ns is not None:
                found = self.ns_pod.get((ns, pod), set()) | self.pod_bare.get(pod, set())
            else:
                found = self.pod_any.get(pod, set())
            if found:
                return next(iter(found)) if len(found) == 1 else None
        return None


def link_gpus(rows: Sequence[EngineRow], gpus: Sequence[GpuRecord]) -> int:
    """Set ``engine_target`` on the GPUs' processes (in place; see the module doc) for the
    top-level fleet ``rows``; returns how many GPUs got a link. A process already
    attributed keeps its target."""
    if not rows or not gpus:
        return 0
    idx = _Index(rows)
    pod_of: dict[str, str | None] = {}  # process name -> its row target (None: no row)
    one_on: dict[str, str | None] = {}  # GPU host -> its one engine target (None: not one)
    linked = 0
    for g in gpus:
        by_pod = False
        if idx.ns_pod or idx.pod_any:
            for p in g.processes:
                name = p.name
                if p.engine_target is None and name:
                    if name not in pod_of:
                        pod_of[name] = idx.by_pod(name)
                    p.engine_target = pod_of[name]
                by_pod = by_pod or p.engine_target is not None
        if by_pod:
            linked += 1
            continue
        if not idx.host or any(p.engine_target for p in g.processes):
            continue
        if (idx.ns_pod or idx.pod_any) and any(p.name for p in g.processes):
            continue  # the GPU names a consumer pod that is none of the rows' pods
        if g.mem_used_bytes is not None and g.mem_used_bytes < HOST_LINK_MIN_USED_BYTES:
            continue
        if g.host not in one_on:
            targets = idx.host.get(host_of(g.host), ()) if g.host else ()
            # no engine on the host, or several: not knowable which GPU is whose
            one_on[g.host] = next(iter(targets)) if len(targets) == 1 else None
        target = one_on[g.host]
        if target is None:
            continue
        g.processes.append(GpuProcess(pid=None, name=f"engine on host {g.host}",
                                      engine_target=target, visible=False))
        linked += 1
    return linked
