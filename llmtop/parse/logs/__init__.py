"""Engine log lines -> ``LogEvent``s: one assembler per followed log, by format and envelope.

- ``assembler(fmt, envelope)``: a stateful reader for one log. ``feed`` takes one raw line as
  read (with its envelope: a Docker json-file object, a CRI line, a journal JSON object, or
  plain text) and answers the events it completed; ``flush`` answers a pending multi-line
  event once its log has been quiet.
- ``fmt``: the engine's line format (``vllm``, ``sglang``, ``triton``, ``llamacpp``, ``tgi``,
  ...) or None (generic: severity words, Python tracebacks).
- ``envelope``: ``plain`` | ``docker`` | ``cri`` | ``journal``.
"""

from __future__ import annotations

from typing import Protocol

from llmtop.model import LogEvent

__all__ = ["ENVELOPES", "Assembler", "assembler"]

ENVELOPES = ("plain", "docker", "cri", "journal")


class Assembler(Protocol):
    """Turns one log's raw lines into events, keeping a multi-line event open across reads."""

    def feed(self, raw: str, read_time: float) -> list[LogEvent]:
        """The events ``raw`` (one line as read, no newline) completed."""
        ...

    def flush(self, now: float) -> list[LogEvent]:
        """The pending event, when the log has been quiet long enough to close it."""
        ...


class _PlainLines:
    """One event per line, severity info: the assembler of a format with no parser yet."""

    def feed(self, raw: str, read_time: float) -> list[LogEvent]:
        return [LogEvent(t_wall=read_time, severity="info", lines=(raw,), headline=raw,
                         stamped=False)]

    def flush(self, now: float) -> list[LogEvent]:
        return []


def assembler(fmt: str | None, envelope: str = "plain") -> Assembler:
    """A fresh assembler for one log of format ``fmt`` inside ``envelope``."""
    if envelope not in ENVELOPES:
        raise ValueError(f"unknown log envelope {envelope!r}")
    return _PlainLines()
