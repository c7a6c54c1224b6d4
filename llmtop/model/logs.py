"""Engine log values: where a log is, one event read from it, a batch of events, a summary.

- ``LogLocation``: where an engine's log is (a file, a container's log, a pod's, the
  journal), or why it cannot be read.
- ``LogEvent``: one event (a line, or a multi-line traceback), with its time and severity.
- ``RawLog``: the events one follower read for one target since the last tick (recorded).
- ``LogSummary``: one engine's log over the window, on its row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LOG_KINDS", "SEVERITIES", "LogEvent", "LogLocation", "LogSummary", "RawLog",
           "severity_at_least"]

SEVERITIES = ("debug", "info", "warning", "error", "critical")
"""Severities, lowest first; every format's levels map onto these."""

LOG_KINDS = ("file", "docker", "cri", "journal", "command")
"""How a log is read: a plain file (also ``/proc/<pid>/fd/1``), Docker's json-file, a CRI
(Kubernetes, Podman k8s-file) file, the systemd journal, a configured command's output."""


def severity_at_least(severity: str, floor: str) -> bool:
    """True when ``severity`` is ``floor`` or worse (unknown severities count as info)."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return rank.get(severity, 1) >= rank.get(floor, 1)


@dataclass(frozen=True, slots=True)
class LogLocation:
    """Where one engine's log is, or why it cannot be read (``error`` set, nothing else)."""

    kind: str | None
    """One of ``LOG_KINDS``; None when no log was found."""
    label: str
    """What the operator reads: ``/var/log/vllm.log``, ``docker vllm-a``, ``pod prod/vllm-0``,
    ``journal vllm.service``."""
    path: str | None = None
    """The file (for ``journal``: None; for ``command``: the command line)."""
    fmt: str | None = None
    """The line format's parser (``parse.logs``), when the engine is known: ``vllm``..."""
    unit: str | None = None
    """The journal's ``_SYSTEMD_UNIT`` (or None, then ``pid`` filters)."""
    pid: int | None = None
    error: str | None = None
    """Why it cannot be read, one line: ``/proc/4711/fd/1 is a terminal``."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "path": self.path,
                "error": self.error}


@dataclass(frozen=True, slots=True)
class LogEvent:
    """One log event: a line, or the lines of one multi-line message (a traceback)."""

    t_wall: float
    """From the line's own stamp where the format has one, else when it was read."""
    severity: str
    """One of ``SEVERITIES``."""
    lines: tuple[str, ...]
    """The event's text lines, redacted, without the format's prefix."""
    headline: str
    """The line that says most: a traceback's exception line, else the first line."""
    stream: str | None = None
    """``stdout`` | ``stderr`` where the source tells."""
    request_id: str | None = None
    """The request id the line names, where the engine logs ids."""
    stamped: bool = True
    """False when ``t_wall`` is the read time (the line had no stamp)."""

    def to_json(self) -> dict[str, Any]:
        return {"t": self.t_wall, "severity": self.severity, "headline": self.headline,
                "lines": list(self.lines), "stream": self.stream,
                "request_id": self.request_id}


@dataclass(slots=True)
class RawLog:
    """What one log follower read for one target since the last tick; recorded as is."""

    target: str
    t_wall: float
    t_mono: float
    location: LogLocation
    events: list[LogEvent] = field(default_factory=list)
    dropped: int = 0
    """Events read but not kept (over the per-tick bound)."""
    rotated: bool = False
    """The file was rotated or truncated since the last read (followed on)."""
    error: str | None = None
    """Why reading failed this time (the follower keeps trying)."""


@dataclass(slots=True)
class LogSummary:
    """One engine's log over the window, for its row, ``--once`` and the exporter."""

    location: LogLocation | None
    counts: dict[str, int] = field(default_factory=dict)
    """Events by severity in the window."""
    last_error: LogEvent | None = None
    """The newest error or critical event (kept past the window: the explaining line)."""
    new_errors: int = 0
    """Error events newer than the last time the operator looked at this log."""
    dropped: int = 0
    lines_total: dict[str, int] = field(default_factory=dict)
    """Events by severity since llmtop started following (the exporter's counter)."""
    cause: LogEvent | None = None
    """The error event that explains the row's bad state (DOWN, STALE, RESTARTED...), the one
    its ``error`` quotes; None when the row is fine or its log says nothing of it."""

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.location.to_json() if self.location is not None else None,
            "counts": dict(self.counts),
            "last_error": self.last_error.to_json() if self.last_error is not None else None,
            "dropped": self.dropped,
        }
