"""Engine logs for ``FakeSource``: the ``logs`` and ``logs_down`` scenarios (tests, screenshots).

- ``logs``: the ``ok`` engines, vLLM's log followed with new errors (the overview's mark, the
  sparklines' strip); SGLang's log found but unreadable; Triton's followed, quiet.
- ``logs_down``: the vLLM engine DOWN after its engine core died, its log's last error the
  ``EngineDeadError`` (the row's ``log.last_error``), then the lines that explain nothing.
- ``with_log_events``: a snapshot carrying ``log_events`` (target -> events, oldest first).

The vLLM lines are the real vLLM 0.32's as the project's shared log notes quote them (the
engine core killed with SIGKILL: ``AsyncLLM output_handler failed.``, its traceback, the
``EngineDeadError`` line, Uvicorn's shutdown lines, ``nanobind: leaked`` lines), without
their ``(APIServer pid=N) LEVEL MM-DD HH:MM:SS [file:line]`` prefix, as the parser gives
them; the request ids and times are SYNTHETIC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llmtop.history.logs import state_text
from llmtop.history.request_window import RequestWindow
from llmtop.model import EngineRow, Snapshot
from llmtop.model.logs import LogEvent, LogLocation, LogSummary

__all__ = ["LOGS_SCENARIOS", "demo_log_events", "logs_snapshot", "slowest_request_id",
           "with_log_events"]

LOGS_SCENARIOS = ("logs", "logs_down")

_VLLM = "vllm@127.0.0.1:8000"
_SGLANG = "sglang@127.0.0.1:30000"
_TRITON = "triton@127.0.0.1:8002"

DEAD = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
        "See stack trace (above) for the root cause.")
"""The line that explains the vLLM engine's death (its traceback's exception line)."""


def with_log_events(snap: Snapshot, events: dict[str, Sequence[LogEvent]]) -> Snapshot:
    """``snap`` carrying ``events`` as its ``log_events``."""
    return replace(snap, log_events=events)


def _access(t: float, n: int) -> LogEvent:
    text = f'127.0.0.1:{51230 + n} - "POST /v1/completions HTTP/1.1" 200 OK'
    return LogEvent(t_wall=t, severity="info", lines=(text,), headline=text, stream="stdout")


def demo_log_events(t: float, request_id: str | None = None, *, dead: bool = False
                    ) -> list[LogEvent]:
    """vLLM's log up to ``t``: access lines (one naming ``request_id`` too), then its engine
    core's death 40 s before ``t``; with ``dead``, the shutdown lines after it."""
    out = [_access(t - 110 + 2.5 * i, i) for i in range(24)]
    if request_id is not None:
        line = f"Added request {request_id}."
        out.append(LogEvent(t_wall=t - 50.0, severity="info", lines=(line,), headline=line,
                            stream="stdout", request_id=request_id))
    out.append(LogEvent(
        t_wall=t - 40.0, severity="error", stream="stdout", headline=DEAD,
        lines=("AsyncLLM output_handler failed.",
               "Traceback (most recent call last):",
               '  File ".../vllm/v1/engine/async_llm.py", line 849, in output_handler',
               "    ...",
               DEAD)))
    if dead:
        for i, line in enumerate(("Shutting down", "Application shutdown complete.",
                                  "Finished server process [20852]")):
            out.append(LogEvent(t_wall=t - 39.0 + 0.1 * i, severity="info", lines=(line,),
                                headline=line, stream="stdout", stamped=False))
        for line in ("nanobind: leaked 4 instances!",
                     ' - leaked instance 0x7f998cf60b08 of type '
                     '"triton._C.libtriton.ir.attribute"'):
            out.append(LogEvent(t_wall=t - 38.5, severity="info", lines=(line,),
                                headline=line, stream="stderr", stamped=False))
    else:
        out += [_access(t - 30 + 2.5 * i, 40 + i) for i in range(12)]
    return out


def slowest_request_id(window: RequestWindow | None, t: float) -> str | None:
    """The id of the window's slowest request by TTFT over the last minute (the requests
    screen's first row), or None."""
    top = window.slowest(60.0, t, by="ttft_s", n=1) if window is not None else []
    return top[0].id if top else None


def logs_snapshot(snap: Snapshot, scenario: str, window: RequestWindow | None = None
                  ) -> Snapshot:
    """``snap`` (the ``ok`` engines) with the logs of ``scenario`` (``LOGS_SCENARIOS``); the
    vLLM log names the slowest request of ``window``."""
    t = snap.time
    request_id = slowest_request_id(window, t)
    dead = scenario == "logs_down"
    vllm_events = demo_log_events(t, request_id, dead=dead)
    errors = [ev for ev in vllm_events if ev.severity == "error"]
    rows: list[EngineRow] = []
    for row in snap.engines:
        row = replace(row)
        if row.target == _VLLM:
            row.log = LogSummary(
                location=LogLocation(kind="file", label="/var/log/vllm/server.log",
                                     path="/var/log/vllm/server.log", fmt="vllm", pid=20852),
                counts={"info": len(vllm_events) - len(errors), "error": len(errors)},
                last_error=errors[-1], new_errors=len(errors))
            if dead:
                # the reason and the cause as the store writes them (``history.logs``)
                row.state, row.error = "down", state_text("connection refused", errors[-1])
                row.log = replace(row.log, cause=errors[-1])
                row.last_ok_age_s = 38.0
        elif row.target == _SGLANG:
            row.log = LogSummary(location=LogLocation(
                kind=None, label="sglang :30000",
                error="/proc/4101/fd/1 is a terminal: start it with its output to a file, or "
                      "set log = PATH for it in the config file"))
        elif row.target == _TRITON:
            row.log = LogSummary(location=LogLocation(kind="docker", label="docker triton-0"),
                                 counts={"info": 3})
        rows.append(row)
    snap = replace(snap, engines=rows)
    triton = [LogEvent(t_wall=t - 90 + 20 * i, severity="info", lines=(line,), headline=line)
              for i, line in enumerate(("Started GRPCInferenceService at 0.0.0.0:8001",
                                        "Started HTTPService at 0.0.0.0:8000",
                                        "Started Metrics Service at 0.0.0.0:8002"))]
    return with_log_events(snap, {_VLLM: vllm_events, _TRITON: triton})

