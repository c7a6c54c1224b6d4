"""Start the demo engines in a separate process and hand back their targets.

``start_demo()`` runs ``python -m llmtop demo serve --ready-file F --parent-pid PID ...`` so
llmtop never pays the simulation's CPU, waits for the ready file (all ports listening), and
returns a :class:`DemoHandle`. The child exits on ``stop()``, at interpreter exit, or when
its parent disappears.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

from llmtop.config import Config, Target
from llmtop.errors import LlmtopError

__all__ = ["BASELINE_ENV", "DemoHandle", "start_demo"]

_START_TIMEOUT_S = 15.0
BASELINE_ENV = "LLMTOP_DEMO_BASELINE_S"
"""Seconds of healthy baseline before a diagnosis scenario's anomaly (``demo/scenarios.py``)."""


class DemoHandle:
    """A running demo process: its targets, GPU URL and OpenAI base URLs."""

    def __init__(self, proc: subprocess.Popen[bytes], info: dict[str, Any],
                 timeout_s: float = 2.0):
        self.proc = proc
        self.pid = proc.pid
        self.info = info
        self.scenario: str = info.get("scenario", "default")
        self.gpu_url: str = info["gpu_url"]
        self.targets: list[Target] = [
            Target(name=e["target"], base_url=e["base_url"], engine=e["engine"],
                   metrics_path="/metrics", timeout_s=timeout_s, host="127.0.0.1",
                   port=e["port"])
            for e in info["engines"]
        ]
        self.api_urls: dict[str, str] = {e["target"]: e["base_url"] for e in info["engines"]}
        self._stopped = False
        atexit.register(self.stop)

    def apply(self, config: Config) -> Config:
        """``config`` with the demo targets added and autodiscovery off."""
        return dataclasses.replace(config, targets=(*config.targets, *self.targets),
                                   discover=False)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Terminate the demo process (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=3.0)
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass


def start_demo(*, scenario: str | None = None, config: Config | None = None,
               engines: list[str] | tuple[str, ...] | None = None,
               extra_args: list[str] | None = None,
               baseline_s: float | None = None,
               anomaly_s: float | None = None) -> DemoHandle:
    """Start the demo engines in a child process; return once they answer.

    ``baseline_s``: seconds of healthy traffic before a diagnosis scenario's anomaly (default:
    ``$LLMTOP_DEMO_BASELINE_S``, else the scenario's own, 30 s); ``anomaly_s``: how long the
    anomaly lasts before the baseline returns (default ``$LLMTOP_DEMO_ANOMALY_S``, else until
    the demo stops).
    """
    fd, ready = tempfile.mkstemp(prefix="llmtop-demo-", suffix=".json")
    os.close(fd)
    os.unlink(ready)
    cmd = [sys.executable, "-m", "llmtop", "demo", "serve", "--quiet", "--ready-file", ready,
           "--parent-pid", str(os.getpid())]
    if engines:
        cmd += ["--engines", ",".join(engines)]
    if scenario:
        cmd += ["--scenario", scenario]
    cmd += extra_args or []
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the child starts
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if baseline_s is not None:
        env[BASELINE_ENV] = repr(float(baseline_s))
    if anomaly_s is not None:
        env["LLMTOP_DEMO_ANOMALY_S"] = repr(float(anomaly_s))
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log, env=env, start_new_session=True)
    deadline = time.monotonic() + _START_TIMEOUT_S
    try:
        while True:
            if os.path.exists(ready):
                with open(ready, encoding="utf-8") as f:
                    info = json.load(f)
                break
            if proc.poll() is not None:
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()[-3:]
                raise LlmtopError("demo engines failed to start: " + " | ".join(tail))
            if time.monotonic() > deadline:
                proc.kill()
                raise LlmtopError("demo engines did not start within 15 s")
            time.sleep(0.02)
    finally:
        if os.path.exists(ready):
            os.unlink(ready)
        log.close()
    timeout = config.timeout_s if config is not None else 2.0
    return DemoHandle(proc, info, timeout_s=timeout)
