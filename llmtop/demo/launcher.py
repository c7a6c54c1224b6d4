"""Start the demo engines in a separate process and hand back their targets.

``start_demo()`` runs ``python -m llmtop demo serve --ready-file F --parent-pid PID ...`` so
llmtop never pays the simulation's CPU, waits for the ready file (all ports listening), and
returns a :class:`DemoHandle`. Each engine writes its log in the demo's folder
(``--log-dir``), named on its target (``Target.log``) so llmtop follows it. The child is
started with :func:`llmtop.children.spawn`: it exits on ``stop()``, at interpreter exit, on
SIGHUP / SIGTERM, and when its parent disappears (it watches the parent's pid itself, and the
children watchdog ends its process group).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Any

from llmtop import children
from llmtop.config import Config, Target
from llmtop.errors import LlmtopError

__all__ = ["BASELINE_ENV", "DemoHandle", "start_demo"]

_START_TIMEOUT_S = 15.0
BASELINE_ENV = "LLMTOP_DEMO_BASELINE_S"
"""Seconds of healthy baseline before a diagnosis scenario's anomaly (``demo/scenarios.py``)."""


class DemoHandle:
    """A running demo process: its targets, GPU URL and OpenAI base URLs."""

    def __init__(self, child: children.Child, info: dict[str, Any],
                 timeout_s: float = 2.0, workdir: str | None = None):
        self.child = child
        self.proc = child.proc
        self.pid = child.pid
        self.info = info
        self.workdir = workdir
        self.scenario: str = info.get("scenario", "default")
        self.gpu_url: str = info["gpu_url"]
        self.targets: list[Target] = [
            Target(name=e["target"], base_url=e["base_url"], engine=e["engine"],
                   metrics_path="/metrics", timeout_s=timeout_s, host="127.0.0.1",
                   port=e["port"], log=e.get("log"))
            for e in info["engines"]
        ]
        self.api_urls: dict[str, str] = {e["target"]: e["base_url"] for e in info["engines"]}
        router = info.get("router")
        if router:  # a serving stack: the router is a target too (its engine found by its names)
            self.targets.append(Target(name=router["target"], base_url=router["base_url"],
                                       metrics_path="/metrics", timeout_s=timeout_s,
                                       host="127.0.0.1", port=router["port"]))
            self.api_urls[router["target"]] = router["base_url"]

    def apply(self, config: Config) -> Config:
        """``config`` with the demo targets added and autodiscovery off."""
        return dataclasses.replace(config, targets=(*config.targets, *self.targets),
                                   discover=False)

    def alive(self) -> bool:
        return self.child.alive()

    def stop(self) -> None:
        """Terminate the demo process and remove its folder (idempotent)."""
        self.child.stop(timeout_s=3.0)
        if self.workdir:
            children.remove_temp_dir(self.workdir)


def start_demo(*, scenario: str | None = None, config: Config | None = None,
               engines: list[str] | tuple[str, ...] | None = None,
               extra_args: list[str] | None = None,
               baseline_s: float | None = None,
               anomaly_s: float | None = None,
               otlp_endpoint: str | None = None) -> DemoHandle:
    """Start the demo engines in a child process; return once they answer.

    ``baseline_s``: seconds of healthy traffic before a diagnosis scenario's anomaly (default:
    ``$LLMTOP_DEMO_BASELINE_S``, else the scenario's own, 30 s); ``anomaly_s``: how long the
    anomaly lasts before the baseline returns (default ``$LLMTOP_DEMO_ANOMALY_S``, else until
    the demo stops); ``otlp_endpoint``: where the demo vLLMs send their request spans
    (``--otlp-traces-endpoint``).
    """
    workdir = children.temp_dir(prefix="llmtop-demo-")
    ready = os.path.join(workdir, "ready.json")
    cmd = [sys.executable, "-m", "llmtop", "demo", "serve", "--quiet", "--ready-file", ready,
           "--parent-pid", str(os.getpid()), "--log-dir", workdir]
    if engines:
        cmd += ["--engines", ",".join(engines)]
    if scenario:
        cmd += ["--scenario", scenario]
    if otlp_endpoint:
        cmd += ["--otlp-traces-endpoint", otlp_endpoint]
    cmd += extra_args or []
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if baseline_s is not None:
        env[BASELINE_ENV] = repr(float(baseline_s))
    if anomaly_s is not None:
        env["LLMTOP_DEMO_ANOMALY_S"] = repr(float(anomaly_s))
    try:
        child = children.spawn(cmd, env=env, log_path=os.path.join(workdir, "demo.log"))
    except BaseException:
        children.remove_temp_dir(workdir)
        raise
    deadline = time.monotonic() + _START_TIMEOUT_S
    try:
        while True:
            if os.path.exists(ready):
                with open(ready, encoding="utf-8") as f:
                    info = json.load(f)
                break
            if not child.alive():
                tail = child.tail(3).replace("\n", " | ")
                raise LlmtopError("demo engines failed to start: " + tail)
            if time.monotonic() > deadline:
                raise LlmtopError(f"demo engines did not start within {_START_TIMEOUT_S:.0f} s")
            time.sleep(0.02)
    except BaseException:
        child.stop(timeout_s=3.0)
        children.remove_temp_dir(workdir)
        raise
    timeout = config.timeout_s if config is not None else 2.0
    return DemoHandle(child, info, timeout_s=timeout, workdir=workdir)
