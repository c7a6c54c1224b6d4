"""Fleet recordings played back: a refresh rebuilt from its recorded answers by the live
code (``fleet_snapshot_at``) and ``FleetReplay``, a recording played in the fleet TUI.

The diagnosis' baseline at a recorded refresh (``load_baseline``: a replay's start, each
seek, ``replay --once``) is what the live run had, from the recording alone: the recorded
warm-up's answers (``fw`` records, rebuilt by ``warm.from_answers``) for the 15 minutes
before the run's first refresh (or travel), the recorded refreshes from it on (not those
before it: the live run started afresh there). The refreshes of the last
``REPLAY_WARM_S`` are judged again (hysteresis, ``waiting_min``); the older ones in the
15-minute span are baseline points only, one per ``REPLAY_BASE_STEP_S``. At the refresh a
warm-up was asked for (a recorded ``--once``) the baseline is exactly the live one.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from typing import TYPE_CHECKING, Any

from llmtop.config import Config, PrometheusConfig
from llmtop.diagnose.thresholds import BASELINE_KEEP_S
from llmtop.errors import RecordingError
from llmtop.fleet.diagnosis import REPLAY_WARM_S, FleetDiagnosis, warm_times
from llmtop.fleet.record import keeps_warmups, layouts_of, refresh_times, role_of
from llmtop.fleet.warm import Warmup, from_answers, warm

if TYPE_CHECKING:
    from llmtop.fleet.monitor import FleetMonitor
    from llmtop.model import EngineRow, GpuRecord, Snapshot
    from llmtop.record.reader import Recording

__all__ = ["REPLAY_BASE_STEP_S", "FleetReplay", "fleet_snapshot_at", "load_baseline",
           "recorded_warmup"]

REPLAY_BASE_STEP_S = 60.0
"""Recorded refreshes older than ``REPLAY_WARM_S`` in the 15-minute baseline span are fed
one per this many seconds (baseline points only): each is rebuilt from its answers."""


def _warm_record(rec: Recording, at: float) -> dict[str, Any] | None:
    """The ``fw`` record of the last refresh at or before ``at`` that was warmed, when its
    points can reach ``at``'s baseline span."""
    fw = None
    for r in rec.records:
        if r.get("k") == "fw" and at - BASELINE_KEEP_S < r["w"] <= at + 1e-6 and (
                fw is None or r["w"] >= fw["w"]):
            fw = r
    return fw


def recorded_warmup(rec: Recording, at: float, exact: bool = False) -> Warmup | None:
    """The warm-up recorded for the last refresh at or before ``at`` that had one and whose
    points can reach ``at``'s baseline span (``exact``: for the refresh at ``at`` only),
    rebuilt from its answers by the live code; None when none was recorded."""
    fw = _warm_record(rec, at)
    if fw is None or (exact and abs(fw["w"] - at) > 1e-6):
        return None
    group = tuple(fw.get("grp") or ("instance",))
    return from_answers(fw["w"], fw.get("ans") or {}, group, fw["win"], layouts_of(fw),
                        start=fw.get("start"), end=fw.get("end"),
                        step_s=float(fw.get("step") or 0.0), queries=int(fw.get("q") or 0),
                        warnings=list(fw.get("warn") or []), error=fw.get("werr"))


def load_baseline(diag: FleetDiagnosis, rec: Recording, times: list[float], i: int,
                  shown: Snapshot | None = None) -> tuple[Warmup | None, dict[str, object]]:
    """Start ``diag`` over at refresh ``i`` of ``times`` with the baseline the live run had
    there (see the module doc) and judge refresh ``i``. Returns the recorded warm-up used
    (None: none) and the ``baseline`` object of ``--once --json`` (the live one when ``i``
    is the refresh the warm-up was asked for). ``shown``: refresh ``i``'s snapshot, when
    already rebuilt (a failed refresh: None, and it is not judged)."""
    diag.reset()
    t = times[i]
    got = recorded_warmup(rec, t)
    # the live run's baseline held nothing before its warm-up's refresh (a start or a
    # travel began it afresh): the recorded refreshes before that are another run's
    lo = max(t - BASELINE_KEEP_S, got.t - 1e-6 if got is not None else float("-inf"))
    judged = [j for j in warm_times(times, i, REPLAY_WARM_S) if times[j] >= lo]
    first = judged[0] if judged else i
    older: list[int] = []
    for j in range(bisect.bisect_left(times, lo), first):
        if not older or times[j] - times[older[-1]] >= REPLAY_BASE_STEP_S - 1e-6:
            older.append(j)
    points: list[tuple[float, list[EngineRow]]] = []
    gpus: dict[float, list[GpuRecord]] = {}
    for j in older:
        mon, snap = fleet_snapshot_at(rec, times[j])
        if mon.error is None:
            points.append((snap.time, snap.engines))
            gpus[snap.time] = snap.gpus
    diag.begin_warm()
    for j in judged:
        mon, snap = fleet_snapshot_at(rec, times[j])
        if mon.error is None:
            diag.on_refresh(snap)
    if shown is None:
        mon, snap = fleet_snapshot_at(rec, t)
        shown = snap if mon.error is None else None
    if shown is not None:
        diag.on_refresh(shown)
    if got is not None and not points and not judged and abs(got.t - t) < 1e-6:
        warm(diag, got)  # the refresh the warm-up was asked for: exactly the live sequence
        doc = got.to_json(diag.warm_points if got.error is None and got.points else 0)
        doc["note"] = diag.last_note()
        return got, doc
    if got is not None and got.error is None:
        points = [*got.points, *points]
        gpus = {**got.gpus, **gpus}
    taken = diag.warm(points, None, gpus) if points or gpus else None
    if taken is None:
        diag.warm_failed(None)
    why = None
    if got is None:
        why = ("this recording holds no warm-up answers (made by an llmtop that did not "
               "record them)" if not keeps_warmups(rec)
               else "no warm-up was recorded in the 15 minutes before this refresh")
    elif got.error is not None:
        why = f"the recorded warm-up failed ({got.error})"
    n = taken or 0
    span = [p[0] for p in points]
    if n == 0:
        then = (f"the baseline holds only the {len(judged)} recorded refreshes before this "
                "one" if judged else "the baseline starts cold") + \
            "; relative rules apply once the refreshes have built one"
        note = f"diagnosis: no baseline from the recording ({why or 'no points'}): {then}"
        diag.note(t, "warn", note)
    else:
        what = f"{len(got.points)} of the recorded warm-up, " if got is not None and \
            got.error is None and got.points else ""
        note = (f"diagnosis: baseline from the recording: {n} points ({what}"
                f"{len(older)} recorded refreshes, {t - min(span):.0f} s to "
                f"{t - max(span):.0f} s before), then {len(judged)} refreshes judged again"
                + (f"; {why}" if why else ""))
        diag.note(t, "info", note)
    warns = list(got.warnings) if got is not None else []
    return got, {
        "source": "recording", "start": min(span) if span else None,
        "end": max(span) if span else None, "step_s": None, "points": n, "queries": 0,
        "partial": bool(warns), "warnings": warns, "error": why if n == 0 else None,
        "note": note}


def fleet_snapshot_at(rec: Recording, at: float, config: Config | None = None
                      ) -> tuple[FleetMonitor, Snapshot]:
    """The monitor state and snapshot of the last refresh evaluated at or before ``at``,
    rebuilt from its recorded answers by the live code (no network)."""
    import httpx

    from llmtop.fleet.monitor import FleetMonitor
    from llmtop.fleet.queries import Plan
    from llmtop.fleet.states import read_state
    from llmtop.model import Snapshot
    from llmtop.sources.prometheus import Backend, PromError

    fq = [r for r in rec.records if r.get("k") == "fq"]
    i = bisect.bisect_right([r["w"] for r in fq], at + 1e-6)
    if i == 0:
        raise RecordingError(f"{rec.path}: no fleet refresh recorded at or before that time")
    r = fq[i - 1]
    head = rec.header.get("prometheus") or {}
    pcfg = PrometheusConfig(url=head.get("url") or "http://recording", window_s=r["win"],
                            scrape_interval_s=r["si"], at=r["w"])
    cfg = Config(prometheus=pcfg) if config is None else Config(
        **{**{f: getattr(config, f) for f in config.__dataclass_fields__}, "prometheus": pcfg})

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("replay: no network")

    mon = FleetMonitor(cfg, transport=httpx.MockTransport(refuse))
    mon.scrape_interval_s = r["si"]
    src = r.get("src") or {}
    mon.backend = Backend(src.get("kind") or "prometheus", src.get("version"))
    mon.eval_time = r["w"]
    mon.warnings = list(r.get("warn") or [])
    mon.partial = bool(r.get("part"))
    if r.get("err"):
        e = r["err"]
        mon.error = PromError(e.get("kind", "http_error"), e.get("message", ""),
                              e.get("http_status"))
        mon._last = Snapshot(time=r["w"], window_s=r["win"])
        return mon, mon._last
    group = tuple(r.get("grp") or ("instance",))
    plan = Plan(group=group, window_s=r["win"], matchers=[], target_matchers=[],
                lookback_s=r.get("look") or 600.0, layouts=layouts_of(r))
    mon.plan = plan
    results = _copy(r.get("ans") or {})  # the row builder pops tags in place: a seek
    errors = {tuple(k): v for k, v in r.get("errs") or []}
    info = read_state(role_of(results, "state"), group)
    mon._last = mon.assemble(results, plan, r["w"], info, errors)
    return mon, mon._last


def _copy(results: dict[str, list[dict[str, Any]]], keep: dict[str, str] | None = None
          ) -> dict[str, list[dict[str, Any]]]:
    """The recorded answers with fresh ``metric`` dicts (only the series whose labels hold
    ``keep``, when given): the recording is read again on a seek."""
    out = {}
    for role, items in results.items():
        if keep and len(keep) == 1:  # one group label: the common case, kept to one lookup
            ((k, v),) = keep.items()
            items = [it for it in items if (it.get("metric") or {}).get(k, "") == v]
        elif keep:
            want = tuple(keep.values())
            items = [it for it in items if tuple(
                [(it.get("metric") or {}).get(k, "") for k in keep]) == want]
        out[role] = [{"metric": dict(it.get("metric") or {}), "value": it.get("value")}
                     for it in items]
    return out


class FleetReplay:
    """A fleet recording played in the fleet TUI: monitor-shaped (``tick``, ``header_text``,
    ``travel``...), each tick shows the refresh recorded at the playback position (the
    recording's pace times ``speed``); ``T`` (travel) seeks to a recorded time, ``now`` to
    the start. No network. Sparklines are backfilled from the recorded refreshes before the
    playback position (``history``); the detail screen's other windows are not recorded."""

    is_replay = True

    def __init__(self, rec: Recording, at: float | None = None, *, speed: float = 1.0,
                 clock: Any = time.monotonic) -> None:
        self.rec = rec
        self.times = refresh_times(rec)
        if not self.times:
            raise RecordingError(f"{rec.path}: no fleet refresh recorded")
        self.speed = speed
        self._clock = clock
        self._from = at if at is not None else self.times[0]
        self._clock0: float | None = None
        self._shown: int | None = None
        self._mon, self._snap = fleet_snapshot_at(rec, self._from)
        self.config = self._mon.config
        self.diagnoser = FleetDiagnosis()
        """Fed with each refresh shown; at the start and after a seek, first with the
        baseline the live run had there (``load_baseline``)."""
        self._judged: int | None = None

    def _index(self) -> int:
        if self._clock0 is None:
            self._clock0 = self._clock()
        pos = self._from + (self._clock() - self._clock0) * self.speed
        return max(0, bisect.bisect_right(self.times, pos + 1e-6) - 1)

    async def tick(self, timeout_s: float | None = None) -> Snapshot:
        i = self._index()
        if i != self._shown:
            self._mon, self._snap = fleet_snapshot_at(self.rec, self.times[i])
            self._judge(i)
            self._shown = i
        return self._snap

    def _judge(self, i: int) -> None:
        """Feed refresh ``i`` to the diagnosis (after a seek or a step back: a fresh one,
        warmed with the recorded refreshes before ``i``)."""
        if self._judged is None or i < self._judged:
            load_baseline(self.diagnoser, self.rec, self.times, i,  # judges i too
                          self._snap if self._mon.error is None else None)
            self._judged = i
            return
        self._judged = i
        if self._mon.error is None:
            got = recorded_warmup(self.rec, self.times[i], exact=True)
            if got is not None:  # the recorded run warmed here (a restart of llmtop)
                self.diagnoser.begin_warm()
            self.diagnoser.on_refresh(self._snap)
            if got is not None:
                warm(self.diagnoser, got)

    def header_text(self) -> str:
        end = " · END" if self._shown == len(self.times) - 1 else ""
        return f"REPLAY {os.path.basename(self.rec.path)} · {self._mon.header_text()}{end}"

    def travel(self, at: float | None) -> None:
        """Play from ``at`` (None: the recording's start)."""
        self._from = self.times[0] if at is None else at
        self._clock0 = None
        self._shown = None
        self._judged = None  # the next refresh shown starts a fresh diagnosis

    def snapshot(self, window_s: float | None = None) -> Snapshot | None:
        return self._mon.snapshot(window_s) if window_s is not None else self._snap

    @property
    def refresh_s(self) -> float:
        """The recording's pace: the shortest gap between two recorded refreshes."""
        gaps = [b - a for a, b in zip(self.times, self.times[1:], strict=False) if b > a]
        return min(gaps) if gaps else float(self._mon.refresh_s)

    async def history(self, key: str, points: int = 90) -> list[tuple[float, EngineRow | None]]:
        """The row ``key`` at the last ``points`` recorded refreshes up to the one shown (as
        ``FleetMonitor.history``), each rebuilt from its recorded answers by the row builder,
        on that row's group only: sparklines start full on open and after a seek. Nothing
        after the shown refresh; a failed refresh is None. [] when the row is unknown."""
        from llmtop.fleet.pinned import locate as _locate
        from llmtop.fleet.rows import build_rows, split_groups

        top, _ = _locate(self._snap.engines, key)
        if top is None or top.labels is None:
            return []
        shown = self._shown if self._shown is not None else self._index()
        fq = [r for r in self.rec.records if r.get("k") == "fq"]
        out: list[tuple[float, EngineRow | None]] = []
        for r in fq[max(0, shown + 1 - max(1, points)):shown + 1]:
            group = tuple(r.get("grp") or ("instance",))
            if r.get("err") or group != tuple(self._mon.plan.group if self._mon.plan else ()):
                out.append((r["w"], None))
                continue
            pin = {g: top.labels.get(g, "") for g in group}
            ans = _copy({k: v for k, v in (r.get("ans") or {}).items()
                         if k.split("#")[0] in ("gauges", "counters", "buckets")}, pin)
            rows, _ = build_rows(split_groups(ans.values(), group), group, r["win"],
                                 layouts_of(r))
            out.append((r["w"], _locate(rows, key)[1]))
            await asyncio.sleep(0)  # one recorded refresh at a time: the screen stays live
        return out

    async def row_windows(self, key: str, windows: Any) -> dict[float, EngineRow | None]:
        """The shown row at the recorded window; other windows were never asked: None."""
        from llmtop.fleet.pinned import locate as _locate

        row = _locate(self._snap.engines, key)[1]
        return {float(w): row if abs(float(w) - self._mon.window_s) < 1e-6 else None
                for w in windows}

    def window_note(self, window_s: float) -> str | None:
        if abs(window_s - self._mon.window_s) < 1e-6:
            return None
        return self._mon.window_note(window_s) or (
            f"not recorded (a fleet recording holds the {self._mon.window_s:g} s window)")

    def __getattr__(self, name: str) -> Any:  # window_s, refresh_s, totals, error...
        return getattr(self._mon, name)

    async def aclose(self) -> None:
        return None
