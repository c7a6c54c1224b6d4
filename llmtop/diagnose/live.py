"""The diagnosis attached to a ``Store``: it runs at each ``commit`` (live and in replay).

``attach(store)`` registers a commit hook that feeds the baseline with the store's 10 s rows
and, every ``DIAG_EVERY_S``, re-runs the rules on the store's rows over ``DIAG_WINDOW_S``,
with the smallest ``waiting`` over that window (from the sparkline series) and the seconds
since a restart. Findings that start, worsen or end go to the store's event log. Whoever
creates a store above the history layer attaches it (the monitor, replay); the store itself
imports nothing from here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from llmtop.diagnose.findings import Finding
from llmtop.diagnose.state import Diagnoser, Transition
from llmtop.model import Snapshot

if TYPE_CHECKING:  # the store is passed in: importing it would pull in parsing and GPUs
    from llmtop.history.store import Store

__all__ = ["LiveDiagnosis", "attach", "findings_of"]


class LiveDiagnosis:
    """A ``Diagnoser`` driven by one store's commits."""

    def __init__(self, store: Store, diagnoser: Diagnoser | None = None) -> None:
        self.store = store
        self.diagnoser = diagnoser or Diagnoser()

    @property
    def findings(self) -> list[Finding]:
        return self.diagnoser.findings

    def on_commit(self, snap: Snapshot, t: float, t_wall: float, *, force: bool = False
                  ) -> None:
        d, store = self.diagnoser, self.store
        d.observe(t, snap.engines, snap.gpus)
        if not force and not d.due(t):
            return
        n = max(3, math.ceil(d.window_s / store.interval_s))
        waiting_min: dict[str, float] = {}
        for row in snap.engines:
            vals = [v for v in store.series(row.key, "waiting", n) if v is not None]
            if len(vals) >= 3:
                waiting_min[row.key] = min(vals)
        reqs = store.requests  # the single requests of the window (spans)
        for tr in d.update(t, lambda: store.rows_over(d.window_s, t), snap.gpus,
                           waiting_min=waiting_min, restarted_ago_s=store.restart_ages(t),
                           force=force, routers=lambda: store.routers_over(d.window_s, t),
                           requests=lambda: reqs.window(d.window_s, t_wall),
                           logs=lambda: store.logs.windows(d.window_s, t_wall)):
            store.event(*event_line(tr), t_wall=t_wall)


def event_line(tr: Transition) -> tuple[str, str, str]:
    """(level, target, text) of the event-log line for a finding's start, worsening or end."""
    f = tr.finding
    level = {"critical": "error", "warn": "warn"}.get(f.severity, "info")
    model = ""  # the line names the target; the Why screen and JSON name the model
    if tr.kind == "start":
        text = f"{f.rule}{model} ({f.severity}): {f.summary}"
    elif tr.kind == "worse":
        text = f"{f.rule}{model} now {f.severity}: {f.summary}"
    else:
        level = "info"
        text = f"{f.rule}{model} ended after {tr.lasted_s or 0:.0f} s"
    return level, f.target, text


def attach(store: Store, diagnoser: Diagnoser | None = None) -> LiveDiagnosis:
    """Run the diagnosis at each commit of ``store`` (once; returns the attached one).
    ``diagnoser``: one of the caller's (the exporter judges every refresh)."""
    if isinstance(store.diagnoser, LiveDiagnosis):
        return store.diagnoser
    live = LiveDiagnosis(store, diagnoser)
    store.diagnoser = live
    store.commit_hooks.append(live.on_commit)
    return live


def findings_of(owner: object) -> list[Finding]:
    """The current findings of a store, or of anything whose ``diagnoser`` keeps a list of
    ``findings`` (a fleet monitor's ``FleetDiagnosis``); ``[]`` when there is none."""
    live = getattr(owner, "diagnoser", None)
    if isinstance(live, LiveDiagnosis):
        return live.findings
    found = getattr(live, "findings", None) if live is not None else None
    return found if isinstance(found, list) else []
