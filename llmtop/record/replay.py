"""Replay a recording through the live code path: the same ``Store``, parsing and derivation.

``ReplaySource`` has the shape of a ``Monitor`` (``tick()``, ``store``, ``aclose()``) plus
the playback controls the TUI binds (play/pause, speed, step, jump, seek).
``snapshot_at`` rebuilds exactly what a live ``--once`` printed at a recorded moment.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from llmtop.capacity import profiles_from_json
from llmtop.config import Config, GpuPeak, Target
from llmtop.diagnose.findings import Finding
from llmtop.diagnose.live import attach as attach_diagnosis
from llmtop.diagnose.thresholds import BASELINE_KEEP_S, DIAG_WINDOW_S
from llmtop.errors import RecordingError
from llmtop.history.store import SERIES_WINDOW_S, Store
from llmtop.model import Container, GpuSample, RawLog, RawScrape, RawSpans, Snapshot
from llmtop.model.logs import SEVERITIES, severity_at_least
from llmtop.record.logs import log_item
from llmtop.record.reader import Item, Recording, Tick, spans_item

__all__ = ["SPEEDS", "ReplaySource", "config_from_header", "diagnosis_at", "parse_when",
           "snapshot_at"]

SPEEDS = (1.0, 10.0, 60.0)
LOOKBACK_S = 330.0
"""History fed before a seek target, so windows and sparklines have data (5 min + slack)."""
LOG_LOOKBACK_S = 900.0
"""Engine log reads fed before a seek target (or ``--once --at``'s ticks), for the log view
and the findings' evidence. Older ones are not read, except each engine's newest error and
its last good answer (``_held``), which the live store keeps past any window: a ``DOWN``
that began longer ago still carries its log line in replay."""
WINDOW_S = 10.0
_ERRORS = frozenset(s for s in SEVERITIES if severity_at_least(s, "error"))

_OFFSET = re.compile(r"^([+-]?)(\d+(?:\.\d+)?)\s*([smh]?)$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def replay_store(rec: Recording, config: Config) -> Store:
    """A store for replaying ``rec``: the capacity profiles are the recorded ones when the
    recording carries them (as the operator saw them), else this machine's."""
    store = Store(config)
    if config.capacity_file is None and isinstance(rec.header.get("capacity"), list):
        store.profiles = profiles_from_json(rec.header["capacity"])
    return store


def config_from_header(rec: Recording, base: Config | None = None) -> Config:
    """A Config with the recorded targets and interval (thresholds etc. from ``base``)."""

    base = base or Config()
    targets = tuple(
        Target(name=t["name"], base_url=t.get("url") or "", engine=t.get("engine"),
               container=Container.from_json(t.get("container")))
        for t in rec.header.get("targets", [])
    )
    interval = float(rec.header.get("interval") or base.interval_s)
    peak = base.gpu_peak if base.gpu_peak is not None else _recorded_peak(rec.header)
    return dataclasses.replace(base, targets=targets, interval_s=interval, discover=False,
                               gpu_peak=peak)


def _recorded_peak(header: dict[str, Any]) -> GpuPeak | None:
    """The ``--gpu-peak`` the recording was made with (``replay --gpu-peak`` wins); a
    malformed entry is ignored (the table's peaks then apply)."""
    d = header.get("gpu_peak")
    if not isinstance(d, dict):
        return None
    vals = [d.get("bytes_per_s"), d.get("flops")]
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)
                             and math.isfinite(v) and v > 0) for v in vals) or vals == [None, None]:
        return None
    src = d.get("source")
    return GpuPeak(bytes_per_s=None if vals[0] is None else float(vals[0]),
                   flops=None if vals[1] is None else float(vals[1]),
                   source=src if isinstance(src, str) and src else "recorded --gpu-peak")


def parse_when(text: str, rec: Recording, position: float | None = None) -> float:
    """``HH:MM[:SS]`` (local time, on the recording's days), ``@UNIX`` time, ``end``, or an
    offset (``+90``, ``-5m``, ``1h``: from ``position`` when signed, else from the start).
    Raises ValueError."""
    text = text.strip()
    if rec.start is None or rec.end is None:
        raise ValueError("the recording has no data")
    if text.startswith("@"):
        try:
            return float(text[1:])
        except ValueError:
            raise ValueError(f"cannot read {text!r}: @ takes a unix time") from None
    if text == "end":
        return rec.end
    m = _CLOCK.match(text)
    if m:
        hh, mm, ss = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        if hh > 23 or mm > 59 or ss > 59:
            raise ValueError(f"not a time of day: {text!r}")
        day = datetime.fromtimestamp(rec.start)
        for add in range(0, int((rec.end - rec.start) // 86400) + 2):
            cand = day.replace(hour=hh, minute=mm, second=ss).timestamp() + add * 86400
            if rec.start - 1 <= cand <= rec.end + 1:
                return cand
        raise ValueError(f"{text} is outside the recording ({_span(rec)})")
    m = _OFFSET.match(text)
    if m:
        sign, num, unit = m.group(1), float(m.group(2)), m.group(3) or "s"
        secs = num * {"s": 1, "m": 60, "h": 3600}[unit]
        if sign:
            ref = position if position is not None else rec.start
            return ref + (secs if sign == "+" else -secs)
        return rec.start + secs
    raise ValueError(f"cannot read {text!r}: use HH:MM[:SS] or an offset like +90, -5m, 1h")


def _span(rec: Recording) -> str:
    f = "%H:%M:%S"
    return (f"{time.strftime(f, time.localtime(rec.start or 0))}–"
            f"{time.strftime(f, time.localtime(rec.end or 0))}")


def _feed(store: Store, item: Item) -> None:
    if isinstance(item, RawScrape):
        store.ingest(item)
    elif isinstance(item, GpuSample):
        store.ingest_gpus(item)
    elif isinstance(item, Tick):
        store.commit(item.t_mono, item.t_wall)
    elif isinstance(item, RawSpans):
        store.ingest_spans(item)
    elif isinstance(item, RawLog):
        store.add_log(item)


def _feed_logs(store: Store, rec: Recording, start: int, stop: int) -> None:
    """Feed the log reads (``l`` records) among ``records[start:stop]``."""
    for r in rec.records[max(0, start):stop]:
        if r.get("k") == "l":
            store.add_log(log_item(r))


def _held(rec: Recording, start: int, log_start: int, stop: int) -> list[Item]:
    """What the live store still held at record ``stop`` from before the records a replay
    feeds (scrapes from ``start``, log reads from ``log_start``), for the log line that
    explains a bad state (``LogBook.cause``), oldest first:

    - the last good metrics answer of each target asked in ``records[start:stop]`` that
      answered well in none of them (an engine down all along): the live store keeps it,
      and the line is looked for from a minute before it, so an older error is not cited;
    - each target's newest error event read before ``log_start``: the live store keeps it
      past any window (``TargetLog.last_error``), so a ``DOWN`` older than
      ``LOG_LOOKBACK_S`` still carries its line.
    """
    asked: set[str] = set()
    good: set[str] = set()
    for r in rec.records[start:stop]:
        if r.get("k") == "s" and "kd" not in r:
            asked.add(r.get("t"))
            if r.get("st") == "ok":
                good.add(r.get("t"))
    want = asked - good
    last_good: dict[str, int] = {}
    last_error: dict[str, int] = {}
    for i, r in enumerate(rec.records[:max(start, log_start)]):
        k = r.get("k")
        if k == "s" and i < start and r.get("st") == "ok" and "kd" not in r \
                and r.get("t") in want:
            last_good[r["t"]] = i
        elif k == "l" and i < log_start and isinstance(r.get("ev"), list) and any(
                isinstance(e, list) and len(e) > 1 and isinstance(e[1], str)
                and e[1] in _ERRORS for e in r["ev"]):
            last_error[str(r.get("t"))] = i
    out: list[tuple[int, Item]] = []
    for i in last_good.values():
        out += [(i, it) for it in rec.items(i, i + 1) if isinstance(it, RawScrape)]
    for i in last_error.values():
        raw = log_item(rec.records[i])
        events = [e for e in raw.events if e.severity in _ERRORS]
        if events:  # the newest error of that read (a damaged event is left out)
            out.append((i, dataclasses.replace(raw, events=events[-1:], dropped=0)))
    out.sort(key=lambda p: p[0])
    return [it for _, it in out]


def _identities(rec: Recording, stop: int) -> dict[str, dict]:
    """The latest identity recorded for each target before record ``stop``. Identity is
    recorded on first contact only, so a replay that starts later must carry it over."""
    out: dict[str, dict] = {}
    for r in rec.records[:stop]:
        if r.get("k") == "s" and r.get("id"):
            out[r["t"]] = r["id"]
    return out


def _with_identity(item: Item, ids: dict[str, dict]) -> Item:
    if isinstance(item, RawScrape) and item.target in ids:
        ident = ids.pop(item.target)
        if item.identity is None:
            item = dataclasses.replace(item, identity=ident)
    return item


def snapshot_at(rec: Recording, at: float, window_s: float, config: Config | None = None
                ) -> Snapshot:
    """The snapshot a live ``--once --window window_s`` would have printed at ``at``.

    Uses the last recorded tick at or before ``at`` and the tick closest to ``window_s``
    before it, feeding only those two ticks' items into a fresh store, as ``--once`` does.
    A target not asked in either tick (a dead router backend backing off) is first given
    its latest earlier answer (within ``LOOKBACK_S``), as the live store still holds it.
    """
    ticks = [(i, r) for i, r in enumerate(rec.records) if r.get("k") == "tick"]
    if len(ticks) < 2:
        raise RecordingError(f"{rec.path}: fewer than two recorded ticks")
    before = [t for t in ticks if t[1]["w"] <= at + 1e-6]
    if len(before) < 2:
        raise RecordingError(f"no two recorded ticks at or before that time ({_span(rec)})")
    b_idx, b = before[-1]
    a_idx, a = min(before[:-1], key=lambda t: abs((b["m"] - t[1]["m"]) - window_s))
    prev_a = max((i for i, _ in ticks if i < a_idx), default=-1)
    prev_b = max((i for i, _ in ticks if i < b_idx), default=-1)
    store = replay_store(rec, config_from_header(rec, config))
    ids = _identities(rec, prev_a + 1)
    log_start = rec.index_at(b["w"] - LOG_LOOKBACK_S)
    for item in _held(rec, prev_a + 1, log_start, b_idx + 1):
        _feed(store, _with_identity(item, ids))
    for item in _latest_before(rec, prev_a + 1, b_idx + 1, b["w"] - LOOKBACK_S):
        _feed(store, _with_identity(item, ids))
    # the engines' log lines before the window: the live store still holds them
    _feed_logs(store, rec, log_start, prev_a + 1)
    for item in rec.items(prev_a + 1, a_idx + 1):
        _feed(store, _with_identity(item, ids))
    for i in range(a_idx + 1, prev_b + 1):  # the spans and log lines between the two ticks
        if rec.records[i].get("k") == "o":
            _feed(store, spans_item(rec.records[i]))
        elif rec.records[i].get("k") == "l":
            store.add_log(log_item(rec.records[i]))
    for item in rec.items(prev_b + 1, b_idx + 1):
        _feed(store, _with_identity(item, ids))
    elapsed = b["m"] - a["m"]
    return store.once_snapshot(elapsed if elapsed > 0 else window_s)


def _latest_before(rec: Recording, start: int, stop: int, since_wall: float) -> list[Item]:
    """The latest metrics answer before ``start`` (recorded after ``since_wall``) of each
    target with no metrics answer in ``records[start:stop]``, oldest first."""
    asked = {r["t"] for r in rec.records[start:stop] if r.get("k") == "s" and "kd" not in r}
    latest: dict[str, int] = {}
    for i in range(start - 1, -1, -1):
        r = rec.records[i]
        if r.get("w", since_wall) < since_wall:
            break
        if r.get("k") == "s" and "kd" not in r and r["t"] not in asked:
            latest.setdefault(r["t"], i)
    out: list[Item] = []
    for i in sorted(latest.values()):
        out.extend(it for it in rec.items(i, i + 1) if isinstance(it, RawScrape))
    return out


def diagnosis_at(rec: Recording, at: float, config: Config | None = None) -> list[Finding]:
    """The findings at ``at``, as the live diagnosis would have had them: the recording's
    last ``BASELINE_KEEP_S`` before the diagnosis window is the baseline, fed through the
    same store and commit hook as live (so hysteresis and all)."""
    store = replay_store(rec, config_from_header(rec, config))
    live = attach_diagnosis(store)
    start = rec.index_at(at - BASELINE_KEEP_S - DIAG_WINDOW_S)
    ids = _identities(rec, start)
    times = rec.times
    i = start
    for item in rec.items(start):
        if times[i] > at + 1e-6:
            break
        _feed(store, _with_identity(item, ids) if ids else item)
        i += 1
    t, tw = store.now_mono, store.now_wall
    if t is not None and tw is not None:
        live.on_commit(store.snapshot(SERIES_WINDOW_S, t, tw), t, tw, force=True)
    return live.findings


class ReplaySource:
    """Drives a ``Store`` from a recording at ×1/×10/×60, with seeking. Monitor-shaped."""

    is_replay = True

    def __init__(self, rec: Recording, config: Config | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rec = rec
        self.config = config_from_header(rec, config)
        self.host = str(rec.header.get("host") or "recording")
        self.replay = self
        self.speed = 1.0
        self.playing = True
        self._clock = clock
        self._last_clock: float | None = None
        self.store = replay_store(self.rec, self.config)
        attach_diagnosis(self.store)
        self._next = 0
        self._ids: dict[str, dict] = {}
        self._it: Iterator[Item] | None = None
        self.position_wall: float | None = rec.start
        if rec.problem:
            self.store.event("warn", None, rec.problem)

    # -- feeding ---------------------------------------------------------------------------
    def _feed_until(self, t_wall: float) -> None:
        """Feed every record with time <= ``t_wall``."""
        if self._it is None:
            self._it = self.rec.items(self._next)
        times = self.rec.times
        while self._next < len(times) and times[self._next] <= t_wall:
            item = next(self._it)
            self._next += 1
            _feed(self.store, _with_identity(item, self._ids) if self._ids else item)
        self.position_wall = t_wall

    def _restart_at(self, t_wall: float) -> None:
        self.store = replay_store(self.rec, self.config)
        attach_diagnosis(self.store)
        self._next = self.rec.index_at(t_wall - LOOKBACK_S)
        log_start = self.rec.index_at(t_wall - LOG_LOOKBACK_S)
        self._ids = _identities(self.rec, self._next)
        stop = bisect.bisect_right(self.rec.times, t_wall)
        for item in _held(self.rec, self._next, log_start, stop):
            _feed(self.store, _with_identity(item, self._ids))
        _feed_logs(self.store, self.rec, log_start, self._next)
        self._it = None
        self._feed_until(t_wall)

    def _goto(self, t_wall: float) -> None:
        start, end = self.rec.start, self.rec.end
        if start is None or end is None:
            return
        t_wall = min(max(t_wall, start), end)
        if self.position_wall is not None and t_wall >= self.position_wall:
            self._feed_until(t_wall)
        else:
            self._restart_at(t_wall)

    async def tick(self) -> Snapshot:
        now = self._clock()
        if self.playing and self._last_clock is not None and self.position_wall is not None:
            self._goto(self.position_wall + (now - self._last_clock) * self.speed)
            if self.rec.end is not None and self.position_wall >= self.rec.end:
                self.playing = False
                self.store.event("info", None, "end of recording")
        elif self.position_wall is not None and self._next == 0:
            self._feed_until(self.position_wall)
        self._last_clock = now
        return self.store.snapshot(WINDOW_S)

    async def aclose(self) -> None:
        return None

    # -- controls (ReplayControl) ----------------------------------------------------------
    def toggle_play(self) -> None:
        self.playing = not self.playing
        self._last_clock = self._clock()

    def set_speed(self, x: float) -> None:
        self.speed = float(x)

    def step(self, n: int) -> None:
        """Move ``n`` recorded ticks forward or back (pauses playback)."""
        self.playing = False
        ticks = [r["w"] for r in self.rec.records if r.get("k") == "tick"]
        if not ticks or self.position_wall is None:
            return

        pos = self.position_wall
        if n > 0:
            i = bisect.bisect_right(ticks, pos + 1e-9)
            self._goto(ticks[min(len(ticks) - 1, i + n - 1)])
        elif n < 0:
            i = bisect.bisect_left(ticks, pos - 1e-9)
            self._goto(ticks[max(0, i + n)])

    def jump(self, seconds: float) -> None:
        if self.position_wall is not None:
            self._goto(self.position_wall + seconds)

    def seek(self, text: str) -> str | None:
        """Go to ``HH:MM[:SS]`` or an offset; returns an error message or None."""
        try:
            self._goto(parse_when(text, self.rec, self.position_wall))
        except ValueError as exc:
            return str(exc)
        return None
