"""Read a recording back as the same ``RawScrape``/``GpuSample`` objects that were recorded.

Bodies are rebuilt exactly from each segment's keyframes and the deltas after them, so
replay runs the same parsing and derivation as live. A truncated or crashed recording
opens up to its last complete frame; ``Recording.problem`` says where and why it ends.
"""

from __future__ import annotations

import base64
import bisect
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from llmtop.errors import RecordingError
from llmtop.model import (
    SCRAPE_METRICS,
    GpuProcess,
    GpuRecord,
    GpuSample,
    RawLog,
    RawScrape,
    RawSpans,
)
from llmtop.record import delta
from llmtop.record.frames import FrameScan, scan_frames
from llmtop.record.legacy import KINDS_FLAG, kind_from_url
from llmtop.record.logs import log_item

__all__ = ["Recording", "Tick", "spans_item"]


@dataclass(frozen=True, slots=True)
class Tick:
    """End of one monitor tick, as recorded."""

    t_mono: float
    t_wall: float


Item = RawScrape | GpuSample | Tick | RawSpans | RawLog


def spans_item(rec: dict[str, Any]) -> RawSpans:
    """The ``RawSpans`` of a recorded ``o`` record."""
    try:
        body = base64.b64decode(rec.get("b") or "", validate=True)
    except (ValueError, TypeError):
        body = b"\x00bad recording"  # decodes as no OTLP body: counted, not raised
    return RawSpans(t_wall=rec["w"], t_mono=rec["m"], body=body, kind=rec.get("ok", "protobuf"),
                    peer=rec.get("p"), transport=rec.get("tr", "http"))


def _gpu(rec: dict[str, Any]) -> GpuSample:
    gpus = []
    for g in rec.get("g", []):
        g = dict(g)
        procs = [GpuProcess(**p) for p in g.pop("processes", [])]
        gpus.append(GpuRecord(**g, processes=procs))
    return GpuSample(t_wall=rec["w"], t_mono=rec["m"], gpus=gpus, error=rec.get("er"),
                     cost_s=rec.get("c"))


def _scrape(rec: dict[str, Any], body: str | None) -> RawScrape:
    return RawScrape(
        target=rec["t"], url=rec.get("u", ""), t_wall=rec["w"], t_mono=rec["m"],
        status=rec["st"], http_status=rec.get("hs"), content_type=rec.get("ct"), body=body,
        error=rec.get("er"), elapsed_s=rec.get("el"), headers=rec.get("hd"),
        identity=rec.get("id"), engine_hint=rec.get("eh"),
        kind=rec.get("kd", SCRAPE_METRICS),
    )


@dataclass(slots=True)
class Recording:
    """An opened recording: header, records and a time index."""

    path: str
    header: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    segment_starts: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    problem: str | None = None
    """Why the file ends early (incomplete final frame...), or None if it ends cleanly."""
    size_bytes: int = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Recording:
        """Read the whole index of a recording (bodies are rebuilt lazily)."""
        path = os.fspath(path)
        scan = FrameScan(0, 0)
        header: dict[str, Any] | None = None
        records: list[dict[str, Any]] = []
        starts: list[int] = []
        try:
            with open(path, "rb") as f:
                for _offset, recs in scan_frames(f, scan):
                    for r in recs:
                        kind = r.get("k")
                        if kind == "header":
                            if header is None:
                                header = r
                            if r.get("schema") not in (1, 2):  # 2: fleet mode
                                raise RecordingError(
                                    f"{path}: recording schema {r.get('schema')} is not "
                                    "supported by this llmtop (schemas 1 and 2)")
                            continue
                        if kind == "seg":
                            starts.append(len(records))
                            continue
                        records.append(r)
        except FileNotFoundError as exc:
            raise RecordingError(f"{path}: no such file") from exc
        except IsADirectoryError as exc:
            raise RecordingError(f"{path}: is a directory") from exc
        if header is None:
            raise RecordingError(f"{path}: no header (empty or not a recording)")
        if not header.get(KINDS_FLAG):  # older: side polls known by their URL only
            for r in records:
                if r.get("k") == "s" and "kd" not in r:
                    r["kd"] = kind_from_url(r.get("u", ""))
        rec = cls(path=path, header=header, records=records, segment_starts=starts or [0],
                  times=[r["w"] for r in records], size_bytes=scan.total_bytes)
        if scan.problem:
            rec.problem = (f"recording ends at {rec.describe_end()}: {scan.problem} "
                           f"after byte {scan.good_bytes} of {scan.total_bytes} "
                           "(the writer was interrupted; later data is lost)")
        return rec

    @property
    def start(self) -> float | None:
        """Wall time of the first record."""
        return self.times[0] if self.times else None

    @property
    def end(self) -> float | None:
        """Wall time of the last record."""
        return self.times[-1] if self.times else None

    def describe_end(self) -> str:
        """The last recorded moment, as local time."""
        if self.end is None:
            return "its start (no data)"
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.end))

    def index_at(self, t_wall: float) -> int:
        """Index of the first record at or after ``t_wall``."""
        return bisect.bisect_left(self.times, t_wall)

    def items(self, start: int = 0, stop: int | None = None) -> Iterator[Item]:
        """Rebuilt items ``records[start:stop]`` (decoding from the segment start)."""
        stop = len(self.records) if stop is None else min(stop, len(self.records))
        if start >= stop:
            return
        seg = self.segment_starts[max(0, bisect.bisect_right(self.segment_starts, start) - 1)]
        lines: dict[str, list[str]] = {}
        for i in range(seg, stop):
            r = self.records[i]
            kind = r.get("k")
            if kind == "s":
                body: str | None = None
                bad = False
                if "b" in r:
                    cur = delta.split_body(r["b"])
                    lines[r["t"]] = cur
                    body = r["b"]
                elif "d" in r:
                    prev = lines.get(r["t"])
                    if prev is None:
                        bad = True
                    else:
                        cur = delta.decode(prev, r["d"])
                        lines[r["t"]] = cur
                        body = "\n".join(cur) if i >= start else None
                if i < start:
                    continue
                item = _scrape(r, body)
                if bad:
                    item = _scrape({**r, "st": "bad_payload", "er": "gap in recording"}, None)
                yield item
            elif i < start:
                continue
            elif kind == "g":
                yield _gpu(r)
            elif kind == "tick":
                yield Tick(t_mono=r["m"], t_wall=r["w"])
            elif kind == "o":
                yield spans_item(r)
            elif kind == "l":
                yield log_item(r)
