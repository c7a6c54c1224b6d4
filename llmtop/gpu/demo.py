"""Simulated GPUs from the demo server: ``GET <gpu_url>`` -> ``{"gpus": [...]}``.

The payload holds GpuRecord fields as JSON, processes as ``{pid, name, used_bytes,
engine_target}`` (see docs/ARCHITECTURE.md). Records get ``source = "demo"``. Never raises:
a refused/slow endpoint or a bad payload becomes ``GpuSample.error``.

``sample`` (a worker thread, stdlib HTTP) or, for ``http://``, ``sample_async`` on the event
loop over llmtop's lean transport: no thread hand-off each tick.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from llmtop import clock as llmtop_clock
from llmtop.config import Target
from llmtop.gpu import proc as procfs
from llmtop.gpu import reasons
from llmtop.model import GpuProcess, GpuRecord, GpuSample
from llmtop.sources.plainhttp import PlainHTTPTransport

__all__ = ["DemoGpuSampler", "record_from_json"]

_FIELDS = {f.name: f for f in dataclasses.fields(GpuRecord)}
_BODY_CAP = 4 * 1024 * 1024
"""A demo GPU payload larger than this is a bad payload (it is a few KB)."""
_SKIP = {"host", "index", "source", "processes", "mig_instances", "extra", "throttle",
         "throttle_time"}
_FRACTIONS = ("sm_active", "sm_occupancy", "tensor_active", "dram_active", "fp16_active")
"""0..1: a value outside that (or NaN) is not a reading, so None."""
_TEXT = ("uuid", "name", "pci_bus_id", "error", "activity_source", "activity_note")
_INTS = {
    "mem_used_bytes",
    "mem_free_bytes",
    "mem_reserved_bytes",
    "mem_total_bytes",
    "ecc_corrected",
    "ecc_uncorrected",
    "xid",
}


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
        if name in _TEXT:
            setattr(rec, name, None if v is None else str(v))
        elif name == "mig_mode":
            rec.mig_mode = None if v is None else bool(v)
        elif name in _FRACTIONS:
            x = _number(v, False)
            setattr(rec, name, x if x is not None and 0.0 <= x <= 1.0 else None)
        else:
            setattr(rec, name, _number(v, name in _INTS))
    if isinstance(d.get("throttle"), list):
        rec.throttle = [str(x) for x in d["throttle"]]
    if isinstance(d.get("throttle_time"), dict):
        shares = {str(k): _number(v, False) for k, v in d["throttle_time"].items()}
        rec.throttle_time = {k: float(v) for k, v in shares.items()
                             if v is not None and 0.0 <= v <= 1.0}
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
                # the demo's pids are this machine's processes: their owner, from /proc
                user=p.get("user") or (procfs.read_owner(pid) if isinstance(pid, int) else None),
            )
        )
    return rec


class DemoGpuSampler:
    """GpuSampler over the demo's GPU JSON endpoint: one kept-alive stdlib HTTP connection
    (a tenth of a sync httpx client's CPU per sample), short timeout."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 1.0,
        clock: Callable[[], float] = llmtop_clock.monotonic,
        wall: Callable[[], float] = llmtop_clock.time,
    ):
        self.url = url
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None
        self._clock = clock
        self._wall = wall
        self._plain: PlainHTTPTransport | None = None
        self._request: httpx.Request | None = None

    def _get(self) -> bytes:
        """The body of one 200 answer; raises on anything else (the connection is dropped)."""
        for attempt in range(2):
            fresh = self._conn is None
            if self._conn is None:
                if self._https:
                    self._conn = http.client.HTTPSConnection(
                        self._host, self._port, timeout=self._timeout,
                        context=ssl.create_default_context())
                else:
                    self._conn = http.client.HTTPConnection(self._host, self._port,
                                                            timeout=self._timeout)
            try:
                self._conn.request("GET", self._path, headers={"Accept": "application/json"})
                resp = self._conn.getresponse()
                body = resp.read(_BODY_CAP + 1)
                if resp.status != 200 or len(body) > _BODY_CAP or resp.will_close:
                    self.close()
                if resp.status != 200:
                    raise OSError(f"HTTP {resp.status}")
                return body
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()
                if fresh or attempt:
                    raise
            except Exception:
                self.close()
                raise
        raise OSError("unreachable")  # pragma: no cover

    def sample(self) -> GpuSample:
        """Fetch and convert; never raises."""
        t0 = time.perf_counter()
        t_wall, t_mono = self._wall(), self._clock()
        try:
            body = self._get()
        except Exception:
            return self._sample(None, t_wall, t_mono, t0)
        return self._sample(body, t_wall, t_mono, t0)

    def held_sample(self) -> GpuSample | None:
        """Never at once: the demo's GPUs are always asked."""
        return None

    def set_targets(self, targets: Sequence[Target]) -> None:
        """The demo names each process's engine itself: nothing to attribute."""

    async def sample_async(self) -> GpuSample:
        """``sample`` on the event loop (``https://``: in a worker thread); never raises."""
        if self._https:
            return await asyncio.to_thread(self.sample)
        t0 = time.perf_counter()
        t_wall, t_mono = self._wall(), self._clock()
        try:
            body = await asyncio.wait_for(self._aget(), self._timeout)
        except Exception:
            return self._sample(None, t_wall, t_mono, t0)
        return self._sample(body, t_wall, t_mono, t0)

    async def _aget(self) -> bytes:
        if self._plain is None:
            self._plain = PlainHTTPTransport()
            self._request = httpx.Request("GET", self.url,
                                          headers={"Accept": "application/json"})
        assert self._request is not None
        resp = await self._plain.handle_async_request(self._request)
        try:
            if resp.status_code != 200:
                raise OSError(f"HTTP {resp.status_code}")
            body = bytearray()
            async for chunk in resp.aiter_raw():
                body += chunk
                if len(body) > _BODY_CAP:
                    break
            return bytes(body)
        finally:
            await resp.aclose()

    def _sample(self, body: bytes | None, t_wall: float, t_mono: float, t0: float
                ) -> GpuSample:
        gpus: list[GpuRecord] = []
        error: str | None = None
        if body is None:
            error = reasons.DEMO_NOT_ANSWERING
        else:
            try:
                if len(body) > _BODY_CAP:
                    raise ValueError("body too large")
                data = json.loads(body)
                items = data["gpus"]
                if not isinstance(items, list):
                    raise TypeError("gpus is not a list")
                gpus = [record_from_json(d) for d in items if isinstance(d, dict)]
            except Exception:
                gpus, error = [], reasons.DEMO_BAD_PAYLOAD
        return GpuSample(
            t_wall=t_wall, t_mono=t_mono, gpus=gpus, error=error, cost_s=time.perf_counter() - t0
        )

    async def aclose(self) -> None:
        """Close both connections (the event loop's and the thread's)."""
        plain, self._plain = self._plain, None
        if plain is not None:
            await plain.aclose()
        self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
