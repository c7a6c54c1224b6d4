"""Where an engine's cold start went, from the start-up spans of an engine llmtop starts.

- A bake-off or tuner trial that starts vLLM turns its tracing on, pointed at a receiver of
  its own, and reads the start-up spans it sends (``Load weights``, ``Allocate KV cache``,
  ``Initialize model``...; ``docs/requests.md``).
- ``traced(spec)`` gives the command and environment to start with (the command gets
  ``--otlp-traces-endpoint``), and the receiver; ``stages(rx)`` the stages it got, in seconds.
- Which commands are changed: by default those that run vLLM themselves (``RUNS_VLLM``);
  with the plan's ``traces = true`` any command (a script that starts vLLM and passes its
  flags on); with ``traces = false`` none. A command that traces already is left as written.
"""

from __future__ import annotations

import re
import time
from typing import Any

__all__ = ["RUNS_VLLM", "STAGE_WORDS", "describe", "stages", "traced"]

RUNS_VLLM = re.compile(r"(?:^|[\s/'\"])vllm\s+serve\b|\bvllm\.entrypoints\b")
"""A start command that runs vLLM itself: ``vllm serve``, ``python -m vllm.entrypoints...``.
``llmtop demo serve --engines vllm`` is not one; a wrapper script is one only where the plan
says ``traces = true``."""

STAGE_WORDS = (("weights", "weights"), ("kv_cache", "KV cache"), ("model_init", "model init"),
               ("total", "loading in all"))


def traced(spec: Any) -> tuple[str | None, dict[str, str], Any]:
    """(start command, env, receiver or None) for ``spec`` (an ``EngineSpec``)."""
    cmd, env = spec.start, dict(spec.env)
    want = spec.traces
    if (want is False or not cmd or "--otlp-traces-endpoint" in cmd
            or (want is None and not RUNS_VLLM.search(cmd))):
        return cmd, env, None
    from llmtop.sources.otlp import OtlpReceiver

    rx = OtlpReceiver("127.0.0.1", 0)
    env.setdefault("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    env.setdefault("OTEL_BSP_SCHEDULE_DELAY", "1000")
    return f"{cmd} --otlp-traces-endpoint {rx.url}", env, rx


def stages(rx: Any, *, wait_s: float = 3.0, sleep: Any = time.sleep) -> dict[str, float] | None:
    """The start-up stages ``rx`` received (waiting up to ``wait_s`` for the last one,
    ``total``); None when the engine sent none."""
    from llmtop.parse.spans import parse_spans

    got: dict[str, float] = {}
    deadline = time.monotonic() + wait_s
    while True:
        for body in rx.drain():
            for cs in parse_spans(body.spans or []).cold_starts:
                got.update(cs.stages)
        if "total" in got or time.monotonic() >= deadline:
            return got or None
        sleep(0.2)


def describe(st: dict[str, float] | None) -> str:
    """One line for the console: ``weights 0.0 s, KV cache 4.5 s, ...``."""
    if not st:
        return "no start-up spans came (vLLM without its OpenTelemetry packages?)"
    return ", ".join(f"{word} {st[key]:.1f} s" for key, word in STAGE_WORDS if key in st)
