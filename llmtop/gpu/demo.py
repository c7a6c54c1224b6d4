"""Simulated GPUs from the demo server: ``GET <gpu_url>`` -> ``{"gpus": [...]}``.

The payload holds GpuRecord fields as JSON, processes as ``{pid, name, used_bytes,
engine_target}`` (see docs/ARCHITECTURE.md). Records get ``source = "demo"``. Never raises:
a refused/slow endpoint or a bad payload becomes ``GpuSample.error``.
"""

from __future__ import annotations

import dataclasses
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from llmtop.gpu import reasons
from llmtop.model import GpuProcess, GpuRecord, GpuSample

__all__ = ["DemoGpuSampler", "record_from_json"]

_FIELDS = {f.name: f for f in dataclasses.fields(GpuRecord)}
_NO_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
"""For plain-http clients, which never start TLS (no CA loaded: it would refuse any peer)."""
_SKIP = {"host", "index", "source", "processes", "mig_instances", "extra", "throttle"}
_INTS = {
    "mem_used_bytes",
    "mem_free_bytes",
    "mem_reserved_bytes",
    "mem_total_bytes",
    "ecc_corrected",
    "ecc_uncorrected",
    "xid",
}


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _number(v: Any, as_int: bool) -> float | int | None:
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return int(v) if as_int else float(v)


def record_from_json(d: dict[str, Any], *, default_host: str = "demo") -> GpuRecord:
    """One GpuRecord from the demo's JSON object; unknown keys are ignored."""
    rec = GpuRecord(
        host=str(d.get("host") or default_host),
        index=int(d.get("index") or 0),
        source="demo",
    )
    for name in _FIELDS:
        if name in _SKIP or name not in d:
            continue
        v = d[name]
        if name in ("uuid", "name", "pci_bus_id", "error"):
            setattr(rec, name, None if v is None else str(v))
        elif name == "mig_mode":
            rec.mig_mode = None if v is None else bool(v)
        else:
            setattr(rec, name, _number(v, name in _INTS))
    if isinstance(d.get("throttle"), list):
        rec.throttle = [str(x) for x in d["throttle"]]
    if isinstance(d.get("mig_instances"), list):
        rec.mig_instances = [str(x) for x in d["mig_instances"]]
    if isinstance(d.get("extra"), dict):
        rec.extra = {
            str(k): float(v)
            for k, v in d["extra"].items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
    for p in d.get("processes") or ():
        if not isinstance(p, dict):
            continue
        pid = p.get("pid")
        used = _number(p.get("used_bytes"), True)
        rec.processes.append(
            GpuProcess(
                pid=pid if isinstance(pid, int) else None,
                name=None if p.get("name") is None else str(p["name"]),
                used_bytes=int(used) if used is not None else None,
                engine_target=p.get("engine_target"),
                cmdline=p.get("cmdline"),
            )
        )
    return rec


class DemoGpuSampler:
    """GpuSampler over the demo's GPU JSON endpoint (sync httpx, short timeout)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 1.0,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self.url = url
        parts = urlsplit(url)
        if transport is None and parts.scheme == "http" and _is_loopback(parts.hostname or ""):
            # The demo's own endpoint on this machine: no proxy, and no redirect is followed,
            # so no TLS: skip loading the certificate store (30-50 ms of CPU at start-up).
            self._client = httpx.Client(timeout=timeout_s, verify=_NO_TLS, trust_env=False)
        else:
            self._client = httpx.Client(timeout=timeout_s, transport=transport)
        self._clock = clock
        self._wall = wall

    def sample(self) -> GpuSample:
        """Fetch and convert; never raises."""
        t0 = time.perf_counter()
        t_wall, t_mono = self._wall(), self._clock()
        gpus: list[GpuRecord] = []
        error: str | None = None
        try:
            resp = self._client.get(self.url)
            resp.raise_for_status()
        except Exception:
            error = reasons.DEMO_NOT_ANSWERING
        else:
            try:
                data = resp.json()
                items = data["gpus"]
                if not isinstance(items, list):
                    raise TypeError("gpus is not a list")
                gpus = [record_from_json(d) for d in items if isinstance(d, dict)]
            except Exception:
                gpus, error = [], reasons.DEMO_BAD_PAYLOAD
        return GpuSample(
            t_wall=t_wall, t_mono=t_mono, gpus=gpus, error=error, cost_s=time.perf_counter() - t0
        )

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:
            pass
