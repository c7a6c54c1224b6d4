"""Fleet mode's live diagnosis: the direct mode's ``Diagnoser`` fed by each fleet refresh.

A fleet row's values are already rates and quantiles over the fleet's window (``window_s``,
``max(4 x scrape interval, 60 s)`` by default), so the rules judge each new refresh's rows
as they are and their evidence names that window (``[1m]``), not the direct mode's 30 s.
The same rows give the baseline a point (at most one per ``BASELINE_STEP_S``, 10 s), and
the baseline leaves out the points inside the current window: it applies once 3 points are
older than the window (80 s after the first refresh at a 10 s refresh and a 60 s window).
``waiting_min`` is the smallest ``waiting`` of the refreshes inside the window (at least
``WAITING_MIN_POINTS`` of them: an instant every refresh, not every scrape),
``restarted_ago_s`` the seconds since a row was first seen ``restarted``. Findings that
start, worsen or end become event-log lines (``take_events``).

The baseline need not start empty: ``begin_warm`` then ``warm(points)`` seed it with rows
rebuilt from the server's own history before the first refresh (``llmtop.fleet.warm``).
Those past rows are baseline points only: no rule runs on them (a finding of the past is
never shown as now, and they make no event line), ``waiting_min`` and the restart ages
never see them. The refreshes judged since ``begin_warm`` are then judged again on the
seeded baseline; only what they had not announced yet becomes an event line.

Owned by ``FleetMonitor`` (``monitor.diagnoser``, fed after each new snapshot, reset by
``travel``) and by ``FleetReplay``. Pure: no I/O, no clock (time is the evaluation time).
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Mapping, Sequence

from llmtop.diagnose.baseline import BaselineTracker
from llmtop.diagnose.findings import Finding, severity_rank
from llmtop.diagnose.live import event_line
from llmtop.diagnose.state import Diagnoser, Transition
from llmtop.diagnose.thresholds import BASELINE_STEP_S, WARMUP_S
from llmtop.model import EngineRow, Event, GpuRecord, Snapshot

__all__ = ["BASELINE_REUSE_S", "REPLAY_WARM_MAX", "REPLAY_WARM_S", "WAITING_MIN_POINTS",
           "WARM_PENDING_MAX", "FleetDiagnosis", "warm_times"]

WAITING_MIN_POINTS = 3
"""Refreshes inside the window needed before ``waiting_min`` is known (as the store's 3)."""
REPLAY_WARM_S = 330.0
"""A fleet replay after a seek first feeds the recorded refreshes of this many seconds before
the position (as the direct TUI replay's 5.5 min), one per ``BASELINE_STEP_S``."""
REPLAY_WARM_MAX = 34
"""At most this many warm-up refreshes (each is rebuilt from its recorded answers)."""
BASELINE_REUSE_S = 60.0
"""A fleet row's baseline medians are recomputed at most this often."""
WARM_PENDING_MAX = 60
"""Refreshes kept for judging again while a warm-up is in flight; past this, it is dropped."""
_EVENTS_KEPT = 500


def warm_times(times: Sequence[float], i: int, span_s: float = REPLAY_WARM_S,
               step_s: float = BASELINE_STEP_S) -> list[int]:
    """Indexes of the refreshes in ``[times[i] - span_s, times[i])``, oldest first, at least
    ``step_s`` apart (the baseline takes one point per step), at most ``REPLAY_WARM_MAX``."""
    if not 0 <= i < len(times):
        return []
    out: list[int] = []
    last: float | None = None
    for j in range(bisect.bisect_left(times, times[i] - span_s - 1e-6), i):
        if last is None or times[j] - last >= step_s - 1e-6:
            out.append(j)
            last = times[j]
    return out[-REPLAY_WARM_MAX:]


class FleetDiagnosis:
    """A ``Diagnoser`` driven by a fleet's refreshes (see the module doc)."""

    baseline_step_s: float = BASELINE_STEP_S
    """The baseline's point step (tests shorten it with the warm-up's step)."""

    def __init__(self) -> None:
        self._events: deque[Event] = deque(maxlen=_EVENTS_KEPT)
        self.reset()

    def reset(self) -> None:
        """Forget the baseline, the findings and the rings (``--at`` travel, a replay seek):
        another time's rows must not be judged against this one's. Pending events stay."""
        # each new refresh runs the rules; the 15-min medians of hundreds of rows are worked
        # out again each BASELINE_REUSE_S, not each refresh (they move little in a minute)
        self.diagnoser = Diagnoser(every_s=0.0, tracker=BaselineTracker(
            step_s=self.baseline_step_s, reuse_s=BASELINE_REUSE_S))
        self._waiting: dict[str, deque[tuple[float, float | None]]] = {}
        self._restart_at: dict[str, float] = {}
        self._restarted: set[str] = set()
        self._last_t: float | None = None
        self._pending: list[Snapshot] | None = None
        """Refreshes judged since ``begin_warm`` (None: no warm-up awaited)."""
        self.refreshes = 0
        """Refreshes judged since the start (or the last ``reset``)."""
        self.warm_points = 0
        """Baseline points seeded by the last ``warm`` (0: none, the baseline started cold)."""

    @property
    def findings(self) -> list[Finding]:
        """The current findings, root cause first (``order_findings``)."""
        return self.diagnoser.findings

    @property
    def window_s(self) -> float:
        return self.diagnoser.window_s

    def on_refresh(self, snap: Snapshot) -> list[Transition]:
        """Judge one refresh's snapshot (once: the same evaluation time again is ignored;
        an earlier one starts over). Returns the transitions, also queued as events."""
        t = snap.time
        if self._last_t is not None:
            if abs(t - self._last_t) < 1e-6:
                return []
            if t < self._last_t:
                self.reset()
        if self._pending is not None:
            self._pending.append(snap)
            if len(self._pending) > WARM_PENDING_MAX:
                self._pending = None  # the warm-up is too late to be of use: cold it stays
        return self._judge(snap)

    def begin_warm(self) -> None:
        """A warm-up is on its way: keep the refreshes judged until ``warm`` (or
        ``warm_failed``) to judge them again on the seeded baseline."""
        self._pending = []

    def warm(self, points: Sequence[tuple[float, Sequence[EngineRow]]],
             t: float | None = None,
             gpus: Mapping[float, Sequence[GpuRecord]] | None = None) -> int | None:
        """Seed the baseline with ``points`` ((time, rows) of the server's history, no
        states needed; ``gpus``: the DCGM GPUs at those times, by time) and judge the
        refreshes kept since ``begin_warm`` again on it (see the
        module doc). ``t``: the refresh the warm-up was asked for (another first refresh
        kept: a warm-up of another time, ignored). Returns the points taken; None when no
        such warm-up is awaited (a ``reset`` since, or too late): nothing changes then."""
        pending = self._pending
        if pending is None or not self._awaits(t):
            return None
        self._pending = None
        announced: dict[tuple[str, str, str | None], int] = {
            f.key: severity_rank(f.severity) for f in self.findings}
        refreshes = self.refreshes
        self.reset()
        first = pending[0].time if pending else float("inf")
        tracker = self.diagnoser.tracker
        taken = 0
        at = dict(points)
        gpus = gpus or {}
        for t in sorted(at.keys() | gpus.keys()):
            rows, gs = at.get(t) or (), gpus.get(t) or ()
            if (rows or gs) and t <= first - tracker.step_s + 1e-6 and \
                    tracker.observe(t, rows, gs) and rows:
                taken += 1
        self.warm_points = taken
        for snap in pending:
            self._last_t = snap.time
            self._judge(snap, announced)
        self.refreshes = max(self.refreshes, refreshes)
        return taken

    def warm_failed(self, t: float | None = None) -> bool:
        """The warm-up asked for the refresh at ``t`` gave nothing: the baseline stays cold
        (as without one). False when no such warm-up is awaited (nothing to say then)."""
        if self._pending is None or not self._awaits(t):
            return False
        self._pending = None
        return True

    def _awaits(self, t: float | None) -> bool:
        """Whether the awaited warm-up is the one asked for the refresh at ``t``."""
        pending = self._pending
        return pending is not None and (t is None or not pending
                                        or abs(pending[0].time - t) <= 1e-6)

    def note(self, t: float, level: str, text: str) -> None:
        """Queue an event-log line of the diagnosis' own (the warm-up's outcome)."""
        self._events.append(Event(t, level, None, text))

    def _judge(self, snap: Snapshot, announced: dict[tuple[str, str, str | None], int]
               | None = None) -> list[Transition]:
        """Run the rules on ``snap``; ``announced`` (a judgement again): finding key ->
        severity already in the event log, whose start is not logged twice."""
        t = snap.time
        self._last_t = t
        self.refreshes += 1
        d = self.diagnoser
        if snap.window_s and snap.window_s > 0:
            d.window_s = snap.window_s
        rows = snap.engines
        waiting_min = self._waiting_min(t, rows, d.window_s)
        restarted = self._restart_ages(t, rows)
        d.observe(t, rows, snap.gpus)
        out = d.update(t, rows, snap.gpus, waiting_min=waiting_min, restarted_ago_s=restarted,
                       force=True)
        for tr in out:
            if announced is not None and tr.kind != "end" and \
                    announced.get(tr.finding.key, -1) >= severity_rank(tr.finding.severity):
                continue
            level, target, text = event_line(tr)
            self._events.append(Event(t, level, target, text))
        return out

    def last_note(self) -> str | None:
        """The text of the latest queued line of the diagnosis' own (``note``), if any."""
        return next((e.text for e in reversed(self._events) if e.target is None), None)

    def take_events(self) -> list[Event]:
        """The event-log lines queued since the last call (each given once)."""
        out = list(self._events)
        self._events.clear()
        return out

    # ------------------------------------------------------------------ context

    def _waiting_min(self, t: float, rows: list[EngineRow], window_s: float
                     ) -> dict[str, float]:
        """Row key -> the smallest ``waiting`` of the refreshes in ``[t - window_s, t]``."""
        lo = t - window_s - 1e-6
        for row in rows:
            ring = self._waiting.get(row.key)
            if ring is None:
                ring = self._waiting[row.key] = deque()
            ring.append((t, row.waiting))
        out: dict[str, float] = {}
        for key in list(self._waiting):
            ring = self._waiting[key]
            while ring and ring[0][0] < lo:
                ring.popleft()
            if not ring:
                del self._waiting[key]
                continue
            vals = [v for _, v in ring if v is not None]
            if len(vals) >= WAITING_MIN_POINTS:
                out[key] = min(vals)
        return out

    def _restart_ages(self, t: float, rows: list[EngineRow]) -> dict[str, float]:
        """Target -> seconds since it was first seen ``restarted`` (a new restart once it was
        seen in another state in between); kept while the warm-up rule can use it."""
        now = {r.target for r in rows if r.state == "restarted"}
        for target in now - self._restarted:
            self._restart_at[target] = t
        self._restarted = now
        for target in [k for k, v in self._restart_at.items() if t - v > 2 * WARMUP_S]:
            del self._restart_at[target]
        return {k: t - v for k, v in self._restart_at.items()}
