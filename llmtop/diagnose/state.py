"""``Diagnoser``: the diagnosis over time, as the store runs it every tick.

It feeds the baseline tracker, re-runs ``diagnose`` every ``DIAG_EVERY_S`` on rows over
``DIAG_WINDOW_S``, and keeps findings with hysteresis: a finding starts when a rule fires
and ends only after the rule has not fired for ``END_HOLD_S`` (the last fired version is
shown meanwhile), so the event log does not flicker. While a finding is (or has been during
its episode) warn or critical, the signals in its evidence (and their kin: ``prefill_mean``
holds every ``prefill_*``) are held out of the row's baseline points and their usual values
are frozen at the episode's start, for at most ``BASELINE_FREEZE_MAX_S``: an anomaly does
not become the baseline while it lasts. Time is passed in; pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmtop.diagnose.baseline import Baseline, BaselineTracker
from llmtop.diagnose.engine import SUPPRESSED_BY, diagnose
from llmtop.diagnose.findings import Finding, order_findings, severity_rank
from llmtop.diagnose.log_citations import carry
from llmtop.diagnose.signals import BASELINE_SIGNALS
from llmtop.diagnose.thresholds import (
    BASELINE_FREEZE_MAX_S,
    DIAG_EVERY_S,
    DIAG_WINDOW_S,
    END_HOLD_S,
)
from llmtop.model import EngineRow, GpuRecord
from llmtop.model.logs import LogEvent
from llmtop.model.request_records import RequestRecord

__all__ = ["Diagnoser", "Transition", "kin"]


@dataclass(frozen=True, slots=True)
class Transition:
    """A finding that started (``kind == "start"``), got worse than ever before during this
    episode (``"worse"``) or ended."""

    kind: str
    finding: Finding
    lasted_s: float | None = None


@dataclass(slots=True)
class _Active:
    finding: Finding
    since: float
    last_fired: float
    worst: int
    """The highest severity reached (a "worse" transition only above it: no flapping)."""
    row_key: str | None = None


def kin(signal: str) -> frozenset[str]:
    """The baseline signals of one evidence signal's family (``prefill_mean`` ->
    ``prefill_p50``, ``prefill_p95``, ``prefill_mean``; ``running`` -> itself)."""
    head = signal.split("_", 1)[0]
    return frozenset(n for n in BASELINE_SIGNALS if n == signal or n.split("_", 1)[0] == head)


class Diagnoser:
    """Baseline + periodic diagnosis + hysteresis (see the module doc)."""

    def __init__(self, *, window_s: float = DIAG_WINDOW_S, every_s: float = DIAG_EVERY_S,
                 hold_s: float = END_HOLD_S, tracker: BaselineTracker | None = None,
                 freeze_max_s: float = BASELINE_FREEZE_MAX_S) -> None:
        self.window_s = window_s
        self.every_s = every_s
        self.hold_s = hold_s
        self.freeze_max_s = freeze_max_s
        self._frozen: dict[str, dict[str, float]] = {}
        """row key -> the usual values of its held signals, as at the episode's start."""
        self.tracker = tracker or BaselineTracker()
        self._active: dict[tuple[str, str, str | None], _Active] = {}
        self._last_run: float | None = None
        self.findings: list[Finding] = []
        """The current findings, ordered (``order_findings``)."""

    def observe(self, t: float, rows: Sequence[EngineRow], gpus: Sequence[GpuRecord]) -> None:
        """Feed the baseline with the store's 10 s rows (a point every 10 s), the signals of
        ongoing warn/critical episodes held out."""
        if self.tracker.due(t):
            self.tracker.observe(t, rows, gpus, hold=self.held(t))

    def held(self, t: float) -> dict[str, frozenset[str]]:
        """row key -> the baseline signals held out of it now (see the module doc)."""
        out: dict[str, frozenset[str]] = {}
        for a in self._active.values():
            if a.worst < 1 or a.row_key is None or not 0 <= t - a.since < self.freeze_max_s:
                continue
            names = frozenset().union(*(kin(e.signal) for e in a.finding.evidence))
            out[a.row_key] = out.get(a.row_key, frozenset()) | names
        return out

    def _baselines(self, keys: list[str], t: float) -> dict[str, Baseline]:
        """The tracker's baselines with the held signals' usual values frozen."""
        bases = self.tracker.baselines(keys, t, self.window_s)
        held = self.held(t)
        for k in [k for k in self._frozen if k not in held]:
            del self._frozen[k]
        for k, names in held.items():
            fz = self._frozen.setdefault(k, {})
            b = bases.get(k)
            if b is not None:
                for n in names - fz.keys():
                    v = b.get(n)
                    if v is not None:
                        fz[n] = v
            if fz:
                bases[k] = (Baseline({**b.values, **fz}, b.points, b.span_s) if b is not None
                            else Baseline(dict(fz), 0, 0.0))
        return bases

    def due(self, t: float) -> bool:
        return self._last_run is None or t - self._last_run >= self.every_s - 1e-6 or \
            t < self._last_run

    def update(
        self,
        t: float,
        rows: Sequence[EngineRow] | Callable[[], Sequence[EngineRow]],
        gpus: Sequence[GpuRecord],
        *,
        waiting_min: Mapping[str, float] | None = None,
        restarted_ago_s: Mapping[str, float] | None = None,
        force: bool = False,
        routers: Sequence[Any] | Callable[[], Sequence[Any]] = (),
        requests: Sequence[RequestRecord] | Callable[[], Sequence[RequestRecord]] = (),
        logs: Mapping[str, Sequence[LogEvent]]
        | Callable[[], Mapping[str, Sequence[LogEvent]]] | None = None,
    ) -> list[Transition]:
        """Re-run the rules if due (or ``force``); returns what started, worsened or ended.
        ``rows``, ``routers`` (``model.stack.RouterRow``) and ``requests`` (the window's single
        requests, cited as examples) and ``logs`` (per target, the log events of the window)
        may be functions, called only when the rules run. A finding that goes on keeps the
        log lines cited at its start (``log_citations.carry``)."""
        if not force and not self.due(t):
            return []
        self._last_run = t
        if callable(rows):
            rows = rows()
        if callable(routers):
            routers = routers()
        if callable(requests):
            requests = requests()
        if callable(logs):
            logs = logs()
        keys = [r.key for r in rows]
        row_keys = {(r.target, r.model): r.key for r in rows}
        now = diagnose(rows, baselines=self._baselines(keys, t),
                       gpus=gpus, gpu_baselines=self.tracker.gpu_baselines(t, self.window_s),
                       window_s=self.window_s, waiting_min=waiting_min,
                       restarted_ago_s=restarted_ago_s, routers=routers,
                       requests=requests, logs=logs)
        out: list[Transition] = []
        seen = set()
        for i, f in enumerate(now):
            seen.add(f.key)
            a = self._active.get(f.key)
            if a is not None:
                f = now[i] = carry(a.finding, f)
            if a is None:
                self._active[f.key] = _Active(f, t, t, severity_rank(f.severity),
                                              row_keys.get((f.target, f.model)))
                out.append(Transition("start", f))
                continue
            if severity_rank(f.severity) > a.worst:
                a.worst = severity_rank(f.severity)
                out.append(Transition("worse", f, t - a.since))
            a.finding, a.last_fired = f, t
        fired: dict[tuple[str, str | None], set[str]] = {}
        for f in now:
            fired.setdefault((f.target, f.model), set()).add(f.rule)
        for k, a in list(self._active.items()):
            if k in seen:
                continue
            # a symptom held by hysteresis ends at once when a cause that explains it fires
            # (a TTFT rise seen before the queue had lasted a whole window is the queue)
            f0 = a.finding
            explained = SUPPRESSED_BY.get(f0.rule, frozenset()) & fired.get(
                (f0.target, f0.model), set())
            if explained or t - a.last_fired >= self.hold_s or t < a.last_fired:
                del self._active[k]
                out.append(Transition("end", a.finding, t - a.since))
        targets = list(dict.fromkeys([*(r.target for r in rows),
                                      *(r.target for r in routers)]))
        self.findings = order_findings((a.finding for a in self._active.values()), targets)
        return out
