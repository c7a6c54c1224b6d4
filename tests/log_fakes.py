"""Hand-built log events shaped like the real vLLM 0.32 EngineDeadError burst.

The shape follows ``shared/LOGS.md`` (lines as the real vLLM 0.32 CPU build wrote them when
its engine core was killed with SIGKILL): one ERROR event (a traceback whose last line is the
exception) from the API server, then lines that explain nothing (Uvicorn's shutdown, the
``nanobind: leaked`` lines). Built by hand until the log parser's captured fixture lands;
only the event values the history and the recorder read are set.
"""

from __future__ import annotations

from llmtop.model.logs import LogEvent, LogLocation, RawLog

__all__ = ["DEAD_HEADLINE", "LOCATION", "burst", "event", "raw_log"]

DEAD_HEADLINE = ("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
                 "See stack trace (above) for the root cause.")
LOCATION = LogLocation(kind="file", label="/tmp/vllm.log", path="/tmp/vllm.log", fmt="vllm")


def event(t, severity="info", text="line", *, lines=None, headline=None, request_id=None,
          stamped=True):
    lines = tuple(lines) if lines is not None else (text,)
    if headline is None:
        headline = lines[-1] if severity in ("error", "critical") else lines[0]
    return LogEvent(t_wall=t, severity=severity, lines=lines, headline=headline,
                    stream="stdout", request_id=request_id, stamped=stamped)


def burst(t):
    """The burst at wall time ``t``: the traceback error event, then unstamped shutdown
    lines read a moment later (they have no stamp of their own)."""
    tb = ("AsyncLLM output_handler failed.",
          "Traceback (most recent call last):",
          '  File ".../vllm/v1/engine/async_llm.py", line 849, in output_handler',
          "    outputs = await engine_core.get_output_async()",
          DEAD_HEADLINE)
    after = ["INFO:     Shutting down", "INFO:     Application shutdown complete.",
             "INFO:     Finished server process [20852]", "nanobind: leaked 4 instances!"]
    after += [f' - leaked instance 0x7f998cf60b{i:02x} of type "triton._C.libtriton.ir.'
              f'attribute"' for i in range(8)]
    return [event(t, "error", lines=tb, headline=DEAD_HEADLINE)] + [
        event(t + 1.5, "info", line, stamped=False) for line in after]


def raw_log(target, t, events, *, location=LOCATION, dropped=0, error=None, t_mono=None):
    return RawLog(target=target, t_wall=t, t_mono=t_mono if t_mono is not None else t,
                  location=location, events=list(events), dropped=dropped, error=error)
