"""The engine's own baseline: the median of each signal over its recent past.

``BaselineTracker.observe`` takes one summary point per row (and per GPU) every
``BASELINE_STEP_S`` from the rows it is given (the store's 10 s rows, which tile time), and
keeps ``BASELINE_KEEP_S`` of them: about 90 points of ~20 floats per row, whatever the
refresh rate. ``baseline(key, t, exclude_s)`` is the per-signal median of the points older
than the current window. Live, it is fed every tick; in a replay, from the recording's
earlier part. A row or GPU with no point in the last ``BASELINE_KEEP_S`` (a target gone, a
pod replaced) is forgotten, so a churning stack keeps a bounded tracker. Pure: time is
passed in, never read.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from llmtop.diagnose.signals import BASELINE_SIGNALS, baseline_values
from llmtop.diagnose.thresholds import BASELINE_KEEP_S, BASELINE_MIN_POINTS, BASELINE_STEP_S
from llmtop.model import EngineRow, GpuRecord

__all__ = ["GPU_SIGNALS", "Baseline", "BaselineTracker", "gpu_key"]

GPU_SIGNALS = ("sm_clock", "util")
_GOOD = ("ok",)


def gpu_key(g: GpuRecord) -> str:
    """``host:index``, the store's GPU series key."""
    return f"{g.host}:{g.index}"


@dataclass(frozen=True, slots=True)
class Baseline:
    """Medians of one row's (or GPU's) signals over ``points`` points spanning ``span_s``."""

    values: Mapping[str, float]
    points: int
    span_s: float
    lifetime: bool = False
    """True for ``--once``'s baseline: the engine's lifetime before the window
    (``diagnose.lifetime``), not a median of recent points."""

    def get(self, name: str) -> float | None:
        return self.values.get(name)


def _median(vals: list[float]) -> float:
    vals.sort()
    n = len(vals)
    mid = n // 2
    return vals[mid] if n % 2 else (vals[mid - 1] + vals[mid]) / 2


class _Series:
    """The points of one row or GPU: (t, values in ``names`` order)."""

    __slots__ = ("cache", "names", "points")

    def __init__(self, names: tuple[str, ...], maxlen: int) -> None:
        self.names = names
        self.points: deque[tuple[float, tuple[float | None, ...]]] = deque(maxlen=maxlen)
        self.cache: tuple[float, Baseline | None] | None = None

    def baseline(self, lo: float, hi: float, t: float, reuse_s: float) -> Baseline | None:
        """Medians over the points in ``[lo, hi]``; a result worked out less than
        ``reuse_s`` before ``t`` is reused (a 15-min median moves little in one step)."""
        if self.cache is not None and 0 <= t - self.cache[0] < reuse_s:
            return self.cache[1]
        pts = [p for p in self.points if lo <= p[0] <= hi]
        out: Baseline | None = None
        if len(pts) >= BASELINE_MIN_POINTS:
            values: dict[str, float] = {}
            cols = zip(*(vs for _, vs in pts), strict=True)  # one tuple per signal, in C
            for name, col in zip(self.names, cols, strict=True):
                vals = [v for v in col if v is not None]
                if len(vals) >= BASELINE_MIN_POINTS:
                    values[name] = _median(vals)
            out = Baseline(values, len(pts), pts[-1][0] - pts[0][0])
        self.cache = (t, out)
        return out


class BaselineTracker:
    """One summary point per row per ``step_s``, kept ``keep_s`` (see the module doc)."""

    def __init__(self, step_s: float = BASELINE_STEP_S, keep_s: float = BASELINE_KEEP_S,
                 reuse_s: float | None = None) -> None:
        self.step_s = step_s
        self.keep_s = keep_s
        self.reuse_s = step_s if reuse_s is None else reuse_s
        """A row's medians are worked out again after this long (default: each step)."""
        self._maxlen = int(keep_s // step_s) + 2
        self._rows: dict[str, _Series] = {}
        self._gpus: dict[str, _Series] = {}
        self._last_t: float | None = None

    def due(self, t: float) -> bool:
        """True when ``observe`` at ``t`` would take a point."""
        return self._last_t is None or t - self._last_t >= self.step_s - 1e-6 or t < self._last_t

    def observe(self, t: float, rows: Iterable[EngineRow], gpus: Iterable[GpuRecord] = (),
                hold: Mapping[str, Collection[str]] | None = None) -> bool:
        """Take a point of every good row and GPU if one is due at ``t``; True if taken.
        ``hold`` (row key -> signal names): signals of an ongoing episode, not usual: their
        point is left empty (None), so the episode does not become the baseline."""
        if not self.due(t):
            return False
        self._last_t = t
        hold = hold or {}
        for row in rows:
            if row.state not in _GOOD or row.model is None:
                continue
            s = self._rows.get(row.key)
            if s is None:
                s = self._rows[row.key] = _Series(BASELINE_SIGNALS, self._maxlen)
            vals = baseline_values(row)
            held = hold.get(row.key)
            if held:
                vals = [None if n in held else v
                        for n, v in zip(BASELINE_SIGNALS, vals, strict=True)]
            s.points.append((t, tuple(vals)))
        for g in gpus:
            if g.error:
                continue
            k = gpu_key(g)
            s = self._gpus.get(k)
            if s is None:
                s = self._gpus[k] = _Series(GPU_SIGNALS, self._maxlen)
            s.points.append((t, (g.sm_clock_mhz, g.util)))
        self._forget_older(t - self.keep_s)
        return True

    def _forget_older(self, cutoff: float) -> None:
        """Drop the rows and GPUs whose newest point is older than ``cutoff``: no baseline
        can be made of them any more."""
        for book in (self._rows, self._gpus):
            gone = [k for k, s in book.items() if not s.points or s.points[-1][0] < cutoff]
            for k in gone:
                del book[k]

    def baseline(self, key: str, t: float, exclude_s: float) -> Baseline | None:
        """Medians of row ``key`` over ``[t - keep_s, t - exclude_s]``; None when fewer than
        ``BASELINE_MIN_POINTS`` points."""
        s = self._rows.get(key)
        return (s.baseline(t - self.keep_s, t - exclude_s, t, self.reuse_s) if s is not None
                else None)

    def gpu_baseline(self, key: str, t: float, exclude_s: float) -> Baseline | None:
        """Like ``baseline`` for one GPU (``host:index``)."""
        s = self._gpus.get(key)
        return (s.baseline(t - self.keep_s, t - exclude_s, t, self.reuse_s) if s is not None
                else None)

    def baselines(self, keys: Iterable[str], t: float, exclude_s: float
                  ) -> dict[str, Baseline]:
        """``baseline`` of each key that has one."""
        out = {}
        for k in keys:
            b = self.baseline(k, t, exclude_s)
            if b is not None:
                out[k] = b
        return out

    def gpu_baselines(self, t: float, exclude_s: float) -> dict[str, Baseline]:
        out = {}
        for k in self._gpus:
            b = self.gpu_baseline(k, t, exclude_s)
            if b is not None:
                out[k] = b
        return out
