"""The engine's own side of a bake-off run: peaks from the rows ``llmtop.monitor`` makes.

``ServerWatch(url, new_monitor)`` runs a monitor (``new_monitor(config)``: the caller passes
``llmtop.monitor.Monitor``'s constructor, since loadgen never imports the monitor) on the
engine's metrics endpoint (engine and metrics path autodetected, as for ``llmtop URL``) in a
thread with its own event loop, one tick every ``interval_s``, and folds each tick's rows
for that target into peaks: running, waiting, KV use, the KV capacity and batch limit the
engine exports, preemptions and generated tokens over the run (lifetime counter deltas: a
restart or reset gives ``None``, never a negative), and GPU memory / utilization where NVML
or a DCGM target answers. Missing stays ``None``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from llmtop.config import Config
from llmtop.loadgen.options import split_url
from llmtop.targets import make_target
from llmtop.urls import default_port

__all__ = ["ServerWatch", "empty_server"]


def empty_server(note: str | None = None) -> dict[str, Any]:
    """The ``server`` object with nothing read."""
    return {"running_peak": None, "waiting_peak": None, "kv_peak": None,
            "kv_capacity_tokens": None, "max_running": None, "preemptions": None,
            "generation_tokens": None, "gpu_memory_peak_bytes": None, "gpu_util_peak": None,
            "gpu_memory_of": None, "engine": None, "engine_version": None, "scrapes": 0,
            "note": note}


def _max(a: float | None, b: float | None) -> float | None:
    if b is None:
        return a
    return b if a is None or b > a else a


class ServerWatch:
    """Watch one engine's metrics while its load runs; ``stop()`` returns the peaks."""

    def __init__(self, url: str, new_monitor: Callable[[Config], Any], *,
                 api_key: str | None = None, insecure: bool = False,
                 interval_s: float = 1.0) -> None:
        base, host, _ep = split_url(url)
        parts = urlsplit(base)
        port = parts.port or default_port(parts.scheme)
        self.target = make_target(host, port, scheme=parts.scheme, api_key=api_key,
                                  verify_tls=not insecure, timeout_s=max(1.0, interval_s))
        self.config = Config(targets=(self.target,), interval_s=interval_s, discover=False,
                             verify_tls=not insecure)
        self.interval_s = interval_s
        self.new_monitor = new_monitor
        self.server = empty_server()
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._reset = False
        self._stop = threading.Event()
        self._ticked = threading.Event()
        self._thread: threading.Thread | None = None
        self.latest: dict[str, Any] = {}
        """The last answered tick: ``t`` (monotonic), running, waiting, kv, preemptions and
        generation_tokens (lifetime counters), for a caller that stops a lost run early."""
        self.ticks = 0
        self.error: str | None = None

    def start(self, first_tick_s: float = 5.0) -> ServerWatch:
        """Start watching; returns after the first tick (so counters are read before the
        load) or ``first_tick_s``."""
        self._thread = threading.Thread(target=self._run, name="llmtop-bakeoff-watch",
                                        daemon=True)
        self._thread.start()
        self._ticked.wait(first_tick_s)
        return self

    def stop(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Stop watching (one last tick first); the ``server`` object."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        s = self.server
        for key in ("preemptions", "generation_tokens"):
            if key in self._first and key in self._last and not self._reset:
                s[key] = self._last[key] - self._first[key]
        if s["scrapes"] == 0:
            s["note"] = self.error or "the metrics endpoint never answered"
        return s

    def _run(self) -> None:
        try:
            asyncio.run(self._loop())
        except Exception as exc:  # a watch failure never takes the bake-off down
            self.error = f"metrics watch failed: {type(exc).__name__}: {exc}"
        finally:
            self._ticked.set()

    async def _loop(self) -> None:
        monitor = self.new_monitor(self.config)
        loop = asyncio.get_running_loop()
        try:
            while True:
                t0 = loop.time()
                snap = await monitor.tick()
                self._fold(snap)
                self._ticked.set()
                if self._stop.is_set():
                    break
                wait = self.interval_s - (loop.time() - t0)
                await asyncio.to_thread(self._stop.wait, max(0.0, wait))
        finally:
            await monitor.aclose()

    def _fold(self, snap: Any) -> None:
        s = self.server
        rows = [r for r in snap.engines if r.target == self.target.name and r.state == "ok"]
        self.ticks += 1
        if rows:
            s["scrapes"] += 1
            r = rows[0]
            life = r.lifetime or {}
            self.latest = {"t": time.monotonic(), "running": r.running, "waiting": r.waiting,
                           "kv": r.kv_cache_usage, "preemptions": life.get("preemptions"),
                           "generation_tokens": life.get("generation_tokens")}
        for r in rows:
            s["running_peak"] = _max(s["running_peak"], r.running)
            s["waiting_peak"] = _max(s["waiting_peak"], r.waiting)
            s["kv_peak"] = _max(s["kv_peak"], r.kv_cache_usage)
            s["kv_capacity_tokens"] = r.kv_capacity_tokens or s["kv_capacity_tokens"]
            s["max_running"] = r.max_running or s["max_running"]
            s["engine"] = r.engine or s["engine"]
            s["engine_version"] = r.engine_version or s["engine_version"]
            for key in ("preemptions", "generation_tokens"):
                v = r.lifetime.get(key) if r.lifetime else None
                if v is None:
                    continue
                if key in self._last and v < self._last[key]:
                    self._reset = True  # the engine restarted: no delta over the run
                self._first.setdefault(key, v)
                self._last[key] = v
        self._fold_gpus(snap.gpus)

    def _fold_gpus(self, gpus: Any) -> None:
        """GPU peaks: the memory of this engine's own processes where NVML attributes them
        (``gpu_memory_of`` = "engine"), else the whole GPUs' used memory ("gpu")."""
        s = self.server
        mine = [(g, sum(p.used_bytes or 0 for p in g.processes
                        if p.engine_target == self.target.name))
                for g in gpus if any(p.engine_target == self.target.name for p in g.processes)]
        if mine:
            s["gpu_memory_of"] = "engine"
            s["gpu_memory_peak_bytes"] = _max(s["gpu_memory_peak_bytes"],
                                              sum(b for _, b in mine))
            for g, _ in mine:
                s["gpu_util_peak"] = _max(s["gpu_util_peak"], g.util)
            return
        if s.get("gpu_memory_of") == "engine":
            return  # attributed before: a sample without its processes adds nothing
        for g in gpus:
            s["gpu_memory_of"] = "gpu"
            s["gpu_memory_peak_bytes"] = _max(s["gpu_memory_peak_bytes"], g.mem_used_bytes)
            s["gpu_util_peak"] = _max(s["gpu_util_peak"], g.util)
