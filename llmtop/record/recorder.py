"""Write raw scrapes and GPU samples to a recording (see ``frames`` for the file layout).

What is stored is the raw input: each scrape's status, timestamps and body (a keyframe,
or a ``delta`` against the previous body of that target), each GPU sample, each engine log
read (``record.logs``: redacted, prompts dropped unless asked), and a marker per monitor
tick. Replay feeds these back through the same parsing and derivation code.

The file is cut into segments (default 5 min). Each segment starts with a keyframe per
target, so the oldest segments can be dropped to honour ``retention_s`` and
``max_bytes``. Secrets are never written: targets are stored as name, URL without
credentials, and engine; request headers and API keys never reach this module.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from llmtop import __version__
from llmtop.capacity import load_profiles
from llmtop.config import Config
from llmtop.errors import ConfigError, RecordingError
from llmtop.model import SCRAPE_METRICS, GpuSample, RawLog, RawScrape, RawSpans
from llmtop.record import delta
from llmtop.record.frames import MAGIC, FrameScan, append_frame, encode_frame, scan_frames
from llmtop.record.legacy import KINDS_FLAG
from llmtop.record.logs import log_record
from llmtop.urls import netloc

__all__ = ["LOG_EVENTS_PER_SEGMENT", "SCHEMA", "Recorder", "parse_size", "safe_url"]

SCHEMA = 1
SPAN_BYTES_PER_SEGMENT = 32 * 1024 * 1024
"""Span bodies kept per segment (5 min), before compression; a flood beyond it is counted
(a ``od`` record at the segment's end), not written."""
LOG_EVENTS_PER_SEGMENT = 20_000
"""Engine log events kept per segment (5 min), all targets together: a flood beyond it is
counted in each later read's drops (``dr``), not written."""


def safe_url(url: str) -> str:
    """The URL without user:password and without a query string."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "?"
    return urlunsplit((parts.scheme, netloc(parts.hostname or "", parts.port or None),
                       parts.path, "", ""))


def parse_size(text: str | None) -> int | None:
    """``"200M"`` -> bytes (K, M, G suffixes, powers of 1024); None stays None."""
    if text is None:
        return None
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(t[-1:], 1)
    try:
        value = float(t[:-1] if t[-1:] in "KMG" else t) * mult
    except ValueError as exc:
        raise RecordingError(f"bad size {text!r} (use e.g. 200M or 1G)") from exc
    if value <= 0:
        raise RecordingError(f"bad size {text!r}: must be positive")
    return int(value)


def _scrape_record(raw: RawScrape) -> dict[str, Any]:
    rec: dict[str, Any] = {"k": "s", "t": raw.target, "w": raw.t_wall, "m": raw.t_mono,
                           "st": raw.status, "u": safe_url(raw.url)}
    for key, value in (("hs", raw.http_status), ("ct", raw.content_type), ("er", raw.error),
                       ("el", raw.elapsed_s), ("hd", raw.headers), ("id", raw.identity),
                       ("eh", raw.engine_hint)):
        if value is not None:
            rec[key] = value
    if raw.kind != SCRAPE_METRICS:  # a side poll; no ``kd``: a metrics scrape
        rec["kd"] = raw.kind
    return rec


@dataclass(slots=True)
class _Segment:
    offset: int
    t_wall: float


def recorded_profiles(config: Config) -> list[dict[str, Any]]:
    """The saved capacity profiles (or ``--capacity``'s) of the recorded targets' host:port,
    newest first, as JSON: the ones ``llmtop.capacity.match`` can pick for them."""
    try:
        profiles = load_profiles(config.capacity_file)
    except ConfigError:
        return []
    nets = {urlsplit(t.base_url).netloc for t in config.targets if t.base_url}
    return [p.to_json() for p in profiles if p.netloc in nets]


class Recorder:
    """Append-only recorder; call it with each ``RawScrape``/``GpuSample`` (a Monitor sink)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: Config,
        *,
        retention_s: float | None = None,
        max_bytes: int | None = None,
        flush_s: float = 5.0,
        segment_s: float = 300.0,
        clock: Any = time.time,
        header: dict[str, Any] | None = None,
        keep_prompts: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.retention_s = retention_s
        self.max_bytes = max_bytes
        self.flush_s = flush_s
        self.segment_s = segment_s
        self._clock = clock
        self._buf: list[dict[str, Any]] = []
        self._prev: dict[str, list[str]] = {}
        self._segments: list[_Segment] = []
        self._last_flush: float | None = None
        self.bytes_written = 0
        self.span_bytes = 0
        """Span body bytes written in the current segment."""
        self.spans_dropped = 0
        """Span bodies not written in the current segment (over ``SPAN_BYTES_PER_SEGMENT``)."""
        self.keep_prompts = keep_prompts
        """Keep the prompts and outputs an engine logs (``record --keep-prompts``)."""
        self.log_events = 0
        """Log events written in the current segment."""
        self.log_dropped = 0
        """Log events not written in the current segment (over ``LOG_EVENTS_PER_SEGMENT``)."""
        self._header = {
            "k": "header", "schema": SCHEMA, "llmtop": __version__,
            "host": socket.gethostname(), "interval": config.interval_s,
            "started": clock(),
            KINDS_FLAG: True,
            "targets": [{"name": t.name, "url": safe_url(t.base_url), "engine": t.engine,
                         **({"container": t.container.to_json()} if t.container else {})}
                        for t in config.targets],
        }
        if config.gpu_peak is not None:  # --gpu-peak: the replay divides by the same peak
            p = config.gpu_peak
            self._header["gpu_peak"] = {"bytes_per_s": p.bytes_per_s, "flops": p.flops,
                                        "source": p.source}
        if header:  # fleet mode: schema 2, mode "fleet", the server (llmtop/fleet/record.py)
            self._header.update(header)
        elif profiles := recorded_profiles(config):
            # the capacity profiles of these engines, as they were: a replay elsewhere (or
            # after a newer probe) shows the headroom the operator saw (docs/capacity.md)
            self._header["capacity"] = profiles
        self._fd = self._open()

    # -- file ---------------------------------------------------------------------------
    def _open(self) -> int:
        exists = os.path.exists(self.path) and os.path.getsize(self.path) > 0
        if exists:
            self._resume()
        else:
            with open(self.path, "wb") as f:
                f.write(MAGIC)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.bytes_written += append_frame(fd, [self._header])
        return fd

    def _resume(self) -> None:
        """Continue an existing recording: drop an incomplete tail, index its segments."""
        scan = FrameScan(0, 0)
        try:
            with open(self.path, "rb") as f:
                for offset, records in scan_frames(f, scan):
                    for r in records:
                        if r.get("k") == "header" and r.get("mode") != self._header.get(
                                "mode"):
                            raise RecordingError("it holds another mode's recording (fleet "
                                                 "and direct mode do not mix)")
                        if r.get("k") == "seg":
                            self._segments.append(_Segment(offset, r["w"]))
        except RecordingError as exc:
            raise RecordingError(f"{self.path}: {exc}; refusing to append to it") from exc
        if scan.good_bytes < scan.total_bytes:
            os.truncate(self.path, scan.good_bytes)

    def _write(self, records: list[dict[str, Any]]) -> None:
        try:
            self.bytes_written += append_frame(self._fd, records)
        except OSError as exc:
            raise RecordingError(f"cannot write {self.path}: {exc.strerror}") from exc

    # -- input --------------------------------------------------------------------------
    def __call__(self, item: RawScrape | GpuSample | RawSpans | RawLog) -> None:
        if isinstance(item, RawScrape):
            self.scrape(item)
        elif isinstance(item, GpuSample):
            self.gpus(item)
        elif isinstance(item, RawSpans):
            self.spans(item)
        elif isinstance(item, RawLog):
            self.log(item)

    def _maybe_roll(self, t_wall: float) -> None:
        if not self._segments or t_wall - self._segments[-1].t_wall >= self.segment_s:
            if self.spans_dropped:
                self._buf.append({"k": "od", "w": t_wall, "n": self.spans_dropped})
            self.span_bytes = self.spans_dropped = 0
            self.log_events = self.log_dropped = 0
            self.flush()
            self._enforce_bounds(t_wall)
            self._segments.append(_Segment(os.path.getsize(self.path), t_wall))
            self._prev.clear()
            self._buf.append({"k": "seg", "w": t_wall})

    def scrape(self, raw: RawScrape) -> None:
        """Record one scrape (keyframe or delta)."""
        self._maybe_roll(raw.t_wall)
        rec = _scrape_record(raw)
        if raw.body is not None:
            lines = delta.split_body(raw.body)
            prev = self._prev.get(raw.target)
            d = delta.encode(prev, lines) if prev is not None else None
            if d is None:
                rec["b"] = raw.body
            else:
                rec["d"] = d
            self._prev[raw.target] = lines
        self._buf.append(rec)
        self._after(raw.t_wall)

    def spans(self, raw: RawSpans) -> None:
        """Record one OTLP trace body as received (base64), within the segment's budget."""
        self._maybe_roll(raw.t_wall)
        if self.span_bytes + len(raw.body) > SPAN_BYTES_PER_SEGMENT:
            self.spans_dropped += 1
            return
        self.span_bytes += len(raw.body)
        rec: dict[str, Any] = {"k": "o", "w": raw.t_wall, "m": raw.t_mono, "ok": raw.kind,
                               "tr": raw.transport, "b": base64.b64encode(raw.body).decode()}
        if raw.peer is not None:
            rec["p"] = raw.peer
        self._buf.append(rec)
        self._after(raw.t_wall)

    def log(self, raw: RawLog) -> None:
        """Record one log read (``record.logs``), within the segment's event budget: events
        over it are added to the read's drops."""
        self._maybe_roll(raw.t_wall)
        room = max(0, LOG_EVENTS_PER_SEGMENT - self.log_events)
        rec = log_record(raw, keep_prompts=self.keep_prompts, keep_events=room)
        kept = len(rec["ev"])
        self.log_events += kept
        self.log_dropped += len(raw.events) - kept
        self._buf.append(rec)
        self._after(raw.t_wall)

    def gpus(self, sample: GpuSample) -> None:
        """Record one GPU sample."""
        self._maybe_roll(sample.t_wall)
        rec: dict[str, Any] = {"k": "g", "w": sample.t_wall, "m": sample.t_mono,
                               "g": [_gpu_dict(g) for g in sample.gpus]}
        if sample.error is not None:
            rec["er"] = sample.error
        if sample.cost_s is not None:
            rec["c"] = sample.cost_s
        self._buf.append(rec)
        self._after(sample.t_wall)

    def record(self, rec: dict[str, Any]) -> None:
        """Record one self-contained record (fleet mode's ``fq``: a refresh's answers)."""
        self._maybe_roll(rec["w"])
        self._buf.append(rec)
        self._after(rec["w"])

    def tick(self, t_mono: float, t_wall: float) -> None:
        """Mark the end of a monitor tick (what ``--once`` and the store commit used)."""
        self._maybe_roll(t_wall)
        self._buf.append({"k": "tick", "w": t_wall, "m": t_mono})
        self._after(t_wall)

    def _after(self, t_wall: float) -> None:
        if self._last_flush is None:
            self._last_flush = t_wall
        if t_wall - self._last_flush >= self.flush_s or len(self._buf) > 2000:
            self.flush()
            self._last_flush = t_wall

    def flush(self) -> None:
        """Write buffered records as one frame."""
        if self._buf:
            records, self._buf = self._buf, []
            self._write(records)

    def close(self) -> None:
        """Flush and close the file."""
        if self._fd < 0:
            return
        self.flush()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    # -- bounds -------------------------------------------------------------------------
    def _enforce_bounds(self, now_wall: float) -> None:
        """Drop the oldest whole segments beyond ``retention_s`` or ``max_bytes``.

        The newest segment is always kept. A segment is too old when the one after it
        started more than ``retention_s`` ago (all its data is older than that).
        """
        segs = self._segments
        size = os.path.getsize(self.path)
        drop = 0
        while drop < len(segs) - 1:
            nxt = segs[drop + 1]
            too_old = self.retention_s is not None and now_wall - nxt.t_wall > self.retention_s
            kept = size - (segs[drop].offset - segs[0].offset)
            too_big = self.max_bytes is not None and kept > self.max_bytes
            if not (too_old or too_big):
                break
            drop += 1
        if drop:
            self._compact(drop)

    def _compact(self, drop: int) -> None:
        keep_from = self._segments[drop].offset
        tmp = self.path + ".tmp"
        header = encode_frame([{**self._header, "compacted": self._clock()}])
        try:  # a stop mid-copy (SIGTERM, SIGHUP, Ctrl-C) leaves no half copy beside the file
            with open(self.path, "rb") as src, open(tmp, "wb") as dst:
                dst.write(MAGIC)
                dst.write(header)
                src.seek(keep_from)
                shutil.copyfileobj(src, dst)
                dst.flush()
                os.fsync(dst.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        os.close(self._fd)
        os.replace(tmp, self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        shift = keep_from - (len(MAGIC) + len(header))
        self._segments = [_Segment(s.offset - shift, s.t_wall) for s in self._segments[drop:]]


def _gpu_dict(g: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(g)
    return {k: v for k, v in d.items() if v is not None}
