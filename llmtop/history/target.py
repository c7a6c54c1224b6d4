"""What the store keeps per target: samples (full, then thinned), status, bodies, identity,
and the target's rows over a window (``target_rows``, built with ``rows``).

No clock: every method takes the time it needs.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from llmtop.history.rows import Entry, build_model_row
from llmtop.model import Container, EngineRow
from llmtop.parse.exposition import Family, ParseError

__all__ = ["FULL_KEEP_S", "THIN_STEP_S", "TargetHistory", "identity_version", "state_word",
           "target_rows"]

FULL_KEEP_S = 330.0
"""Every sample is kept this long (the 5 min window plus margin)."""
THIN_STEP_S = 10.0
"""Older samples (up to ``history_s``) are thinned to one per this many seconds."""


@dataclass(slots=True)
class TargetHistory:
    """Everything the store keeps about one target."""

    name: str
    host: str
    engine: str | None = None
    hinted: bool = False
    version: str | None = None
    identity: dict[str, Any] | None = None
    wants_identity: bool = True
    recent: deque[Entry] = field(default_factory=deque)
    old: deque[Entry] = field(default_factory=deque)
    epoch: int = 0
    status: str | None = None
    """Status of the latest scrape after parsing (ok/down/http_error/unauthorized/bad_payload)."""
    error: str | None = None
    http_status: int | None = None
    last_raw_mono: float | None = None
    last_ok_mono: float | None = None
    restart_mono: float | None = None
    bodies: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=2))
    fam_cache: dict[float, dict[str, Family]] = field(default_factory=dict)
    models: dict[str, None] = field(default_factory=dict)
    """Models in order of first appearance."""
    prev_state: str | None = None
    seen: bool = False
    container: Container | None = None
    """Where discovery found the engine (shown on its rows; ``llmtop.discover``)."""
    health: deque[tuple[float, int | str]] = field(default_factory=lambda: deque(maxlen=64))
    """(monotonic time, ``sources.health.health_status``) of each health answer, newest
    last (asked only while a row may be stuck)."""

    def set_status(self, status: str, error: str | None, http: int | None) -> None:
        """Status of the latest scrape after parsing."""
        self.status, self.error, self.http_status = status, error, http

    def trim(self, now: float, keep_s: float) -> None:
        """Keep every sample for ``FULL_KEEP_S``, then one per ``THIN_STEP_S`` up to ``keep_s``."""
        while len(self.recent) > 2 and self.recent[0].t_mono < now - FULL_KEEP_S:
            e = self.recent.popleft()
            if not self.old or e.t_mono - self.old[-1].t_mono >= THIN_STEP_S:
                self.old.append(e)
        while self.old and self.old[0].t_mono < now - keep_s:
            self.old.popleft()

    def state(self, t: float, interval_s: float) -> tuple[str, str | None]:
        """``(state, error)`` at monotonic time ``t``."""
        if self.status is None:
            return "stale", "no data yet"
        if self.status != "ok":
            return self.status, self.error
        assert self.last_ok_mono is not None
        age = t - self.last_ok_mono
        if age > 3 * interval_s + 1e-9:
            return "stale", f"no fresh data for {age:.0f}s"
        if self.restart_mono is not None and t - self.restart_mono < max(10.0, 3 * interval_s):
            return "restarted", None
        return "ok", None

    def health_at(self, window_s: float, t: float) -> int | str | None:
        """The newest health answer in the window ending at ``t``; None when none."""
        for t_h, status in reversed(self.health):
            if t_h <= t + 1e-9:
                return status if t_h > t - window_s else None
        return None

    def entries(self, t_end: float) -> list[Entry]:
        """Kept samples up to ``t_end``, oldest first."""
        entries = list(self.old) + list(self.recent) if self.old else list(self.recent)
        if entries and entries[-1].t_mono > t_end:
            times = [e.t_mono for e in entries]
            entries = entries[: bisect.bisect_right(times, t_end)]
        return entries

    def window(self, window_s: float, t_end: float) -> list[Entry]:
        """Samples of the newest process (epoch) in the window ending at the newest sample at
        or before ``t_end``; the base is the newest sample at or before the window start (as
        ``derive.window_start``). Walks back from the newest end only as far as it needs: an
        hour of kept history costs a 10 s window nothing."""
        out: list[Entry] = []
        start = epoch = None
        for e in chain(reversed(self.recent), reversed(self.old)):
            if e.t_mono > t_end:
                continue
            if start is None:
                start, epoch = e.t_mono - window_s + 1e-6, e.epoch
            elif e.epoch != epoch:
                break  # an older process: not in this window
            out.append(e)
            if e.t_mono <= start:
                break
        out.reverse()
        return out

    def families(self, t: float, body: str) -> dict[str, Family]:
        """Fully parsed families of one kept body (lazy, cached)."""
        fams = self.fam_cache.get(t)
        if fams is None:
            from llmtop.parse.exposition import parse

            try:
                fams = parse(body)
            except ParseError:
                fams = {}
            self.fam_cache[t] = fams
        return fams


def identity_version(identity: dict[str, Any] | None) -> str | None:
    """The ``version`` an identity probe found, if any."""
    if not identity:
        return None
    v = identity.get("version")
    return v if isinstance(v, str) and v else None


def state_word(state: str | None, http_status: int | None) -> str:
    """DOWN / HTTP 503 / UNAUTHORIZED (HTTP 401) / BAD PAYLOAD / STALE."""
    if state == "http_error":
        return f"HTTP {http_status}" if http_status else "HTTP error"
    if state == "unauthorized":
        return f"UNAUTHORIZED (HTTP {http_status})" if http_status else "UNAUTHORIZED"
    return {"down": "DOWN", "bad_payload": "BAD PAYLOAD", "stale": "STALE"}.get(
        state or "", (state or "").upper()
    )


def target_rows(
    ts: TargetHistory, window_s: float, t: float, interval_s: float
) -> list[EngineRow]:
    """Rows of one target (one per model in its newest good sample, ranks folded in;
    one row without a model when there is none) over ``window_s``, at time ``t``."""
    state, error = ts.state(t, interval_s)
    base: dict[str, Any] = {
        "target": ts.name,
        "engine": ts.engine,
        "engine_version": ts.version,
        "state": state,
        "error": error,
        "http_status": ts.http_status,
        "last_ok_age_s": (t - ts.last_ok_mono) if ts.last_ok_mono is not None else None,
        "container": ts.container,
        "health_status": ts.health_at(window_s, t),
    }
    window = ts.window(window_s, t)
    if not window:
        return [EngineRow(key=f"{ts.name}|", model=None, **base)]
    latest = window[-1].sample
    if latest.engine:
        base["engine"] = latest.engine
    present = [m for m in ts.models if m in window[-1].by_model]
    if not present:
        return [EngineRow(key=f"{ts.name}|", model=None, **base)]
    rows = []
    for model in present:
        row = build_model_row(EngineRow(key=f"{ts.name}|{model}", model=model, **base),
                              window, model)
        for r in latest.ranks:
            if r.model != model:
                continue
            rank = r.rank or ""
            rr = EngineRow(key=f"{ts.name}|{model}|{rank}", model=model, rank=rank, **base)
            row.ranks.append(build_model_row(rr, window, model, rank))
        rows.append(row)
    return rows
