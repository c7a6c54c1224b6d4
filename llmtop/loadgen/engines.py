"""Engines a bake-off starts itself: start, wait until ready, time the cold start, stop.

An engine with a ``start`` shell command runs through ``llmtop.children.spawn`` (its own
process group, output in a log file, ended when llmtop ends however it ends). Ready means
``GET /health`` or ``GET /v1/models`` answers 200 (a 200 from /v1/models with no model
listed is not ready yet, nor is a 503 from /health whatever /v1/models says: SGLang answers
so until its own warm-up request has run, llama-server while it loads the model); the cold
start is start -> ready -> the first token of one streamed request (``first_token``).
Stopping sends SIGTERM to the group and SIGKILL after ``stop_timeout_s``, then waits until
the GPU memory the engine held is released (NVML where present; without NVML nothing is
checked and the report says so).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from llmtop.children import Child, spawn
from llmtop.loadgen.options import split_url
from llmtop.loadgen.reconcile import Preflight

__all__ = ["EngineProcess", "LaunchError", "first_token", "gpu_memory_used_mib",
           "wait_gpu_released", "wait_ready"]

_POLL_S = 0.1


class LaunchError(Exception):
    """The engine did not start or never got ready; ``log_tail`` has its last lines."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass
class EngineProcess:
    """One started engine and its timings (monotonic seconds)."""

    child: Child
    t_start: float
    t_ready: float | None = None
    t_first_token: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def log_path(self) -> str | None:
        return self.child.log_path

    @property
    def cold_start_s(self) -> float | None:
        """Start -> first token (None until both are known)."""
        if self.t_first_token is None:
            return None
        return self.t_first_token - self.t_start

    @property
    def ready_s(self) -> float | None:
        return None if self.t_ready is None else self.t_ready - self.t_start

    @classmethod
    def start(cls, command: str, *, env: Mapping[str, str] | None, log_path: str,
              gpus: str | None = None) -> EngineProcess:
        """Run ``command`` with ``sh -c`` in its own group (``gpus``: CUDA_VISIBLE_DEVICES).

        The folder of this Python comes first on ``PATH``, so ``llmtop …`` in a plan means this
        llmtop (and its venv's tools) even when the venv is not activated."""
        full = dict(os.environ)
        full.update(env or {})
        here = os.path.dirname(sys.executable)
        path = full.get("PATH", "")
        if here and path.split(os.pathsep)[0] != here:
            full["PATH"] = here + (os.pathsep + path if path else "")
        if gpus is not None:
            full["CUDA_VISIBLE_DEVICES"] = gpus
        t0 = time.monotonic()
        try:
            child = spawn(command, shell=True, env=full, log_path=log_path)
        except Exception as exc:  # LlmtopError from spawn, or OSError
            raise LaunchError(f"cannot start the engine: {exc}") from None
        return cls(child, t0)

    def stop(self, timeout_s: float = 10.0) -> int | None:
        return self.child.stop(timeout_s=timeout_s)


def _ready_once(client: httpx.Client, base: str, headers: dict[str, str]) -> bool:
    for path in ("/health", "/v1/models"):
        try:
            r = client.get(base + path, headers=headers)
        except httpx.HTTPError:
            return False  # not listening yet: no point asking the second path
        if path == "/health" and r.status_code == 503:
            return False  # it says it is not ready (SGLang until its own warm-up has run)
        if r.status_code != 200:
            continue
        if path == "/health":
            return True
        try:
            if r.json().get("data"):
                return True
        except (ValueError, AttributeError):
            continue
    return False


def wait_ready(url: str, *, timeout_s: float, api_key: str | None = None,
               proc: EngineProcess | None = None, insecure: bool = False,
               should_stop: Callable[[], bool] = lambda: False) -> float:
    """Poll until the engine is ready; returns the monotonic time it was. Raises
    ``LaunchError`` when ``proc`` exits, on the timeout, or when ``should_stop()``."""
    base, _host, _ep = split_url(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    end = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0, verify=not insecure, trust_env=False) as client:
        while True:
            if should_stop():
                raise LaunchError("stopped (Ctrl-C) while the engine was starting",
                                  proc.child.tail() if proc else "")
            if proc is not None and not proc.child.alive():
                code = proc.child.proc.returncode
                raise LaunchError(f"the start command exited (status {code}) before the "
                                  "engine was ready", proc.child.tail())
            if _ready_once(client, base, headers):
                t = time.monotonic()
                if proc is not None:
                    proc.t_ready = t
                return t
            if time.monotonic() >= end:
                raise LaunchError(f"not ready after {timeout_s:g} s (/health never said 200 "
                                  "and /v1/models listed no model, or /health said 503)",
                                  proc.child.tail() if proc else "")
            time.sleep(_POLL_S)


def first_token(url: str, model: str | None, *, api_key: str | None = None,
                endpoint: str | None = None, insecure: bool = False,
                timeout_s: float = 300.0, books: Preflight | None = None) -> float | None:
    """Stream one 1-token request (completions, else chat, unless the URL or ``endpoint``
    says which); the monotonic time of its first content event, or None. Each request sent
    is counted in ``books`` (it is load on the server outside any run)."""
    base, _host, ep = split_url(url)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    for kind in [ep or endpoint] if (ep or endpoint) else ["completions", "chat"]:
        body: dict[str, Any] = {"max_tokens": 1, "stream": True}
        if model:
            body["model"] = model
        if kind == "chat":
            path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": "Hi"}]
        else:
            path, body["prompt"] = "/v1/completions", "Hi"
        if books is not None:
            books.requests += 1
        try:
            with httpx.Client(timeout=timeout_s, verify=not insecure, trust_env=False) as c, \
                    c.stream("POST", base + path, json=body, headers=headers) as r:
                if r.status_code != 200:
                    continue
                for line in r.iter_lines():
                    if line.startswith("data:") and "[DONE]" not in line and (
                            '"text"' in line or '"content"' in line):
                        t = time.monotonic()
                        if books is not None:
                            books.ok += 1
                            books.output_tokens += 1
                        return t
        except httpx.HTTPError:
            return None
    return None


def gpu_memory_used_mib() -> list[float] | None:
    """Used memory of every GPU (MiB) from NVML; None without NVML or GPUs."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        n = pynvml.nvmlDeviceGetCount()
        return [pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
                / 2**20 for i in range(n)] or None
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def wait_gpu_released(before: list[float] | None, *, timeout_s: float = 60.0,
                      slack_mib: float = 512.0) -> str:
    """Wait until every GPU is back within ``slack_mib`` of ``before``; returns a note."""
    if before is None:
        return "GPU memory release not checked (no NVML)"
    end = time.monotonic() + timeout_s
    while True:
        now = gpu_memory_used_mib()
        if now is None or len(now) != len(before):
            return "GPU memory release not checked (NVML stopped answering)"
        if all(n <= b + slack_mib for n, b in zip(now, before, strict=True)):
            return "GPU memory released"
        if time.monotonic() >= end:
            held = max(n - b for n, b in zip(now, before, strict=True))
            return f"GPU memory still {held:.0f} MiB above its level before the start " \
                   f"after {timeout_s:g} s"
        time.sleep(0.5)
