"""Helpers for the log parser tests: the real fixtures fed line by line at a fixed read time."""

from __future__ import annotations

import time
from pathlib import Path

from llmtop.model import LogEvent
from llmtop.parse.logs import assembler

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
READ = time.mktime((2026, 12, 7, 9, 40, 0, 0, 0, -1))
"""The read time of every fixture line: after the captures, the same day."""


def local(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: float = 0.0) -> float:
    return time.mktime((y, mo, d, h, mi, s, 0, 0, -1)) + frac


def raw_lines(name: str) -> list[bytes]:
    """The fixture's lines as bytes, as a follower reads them (no newline, \\r kept)."""
    data = (FIXTURES / name).read_bytes().split(b"\n")
    if data and data[-1] == b"":
        data.pop()
    return [x for x in data if not x.startswith(b"# source:")]


def events(name: str, fmt: str | None, envelope: str = "plain", **kw: object) -> list[LogEvent]:
    """Every event of a fixture, fed line by line at ``READ``, then flushed."""
    a = assembler(fmt, envelope, **kw)  # type: ignore[arg-type]
    out: list[LogEvent] = []
    for line in raw_lines(name):
        out += a.feed(line, READ)
    out += a.flush(READ + 1.0)
    return out
