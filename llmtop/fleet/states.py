"""Row states in fleet mode, from the ``state`` query's answers. Pure: no I/O.

* ``down``: every target of the row's group has ``up == 0`` (with the target's last scrape
  error when ``/api/v1/targets`` gave it: ``down_errors``); some but not all down:
  ``k of n targets down``;
* ``stale``: the newest sample is older than 2 x the scrape interval, or the instance was
  seen in the inventory's lookback but has no current series;
* ``restarted``: ``process_start_time_seconds`` moved inside the window;
* targets of engine jobs that never exposed engine series but are down get a row too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from llmtop.fleet.queries import MODEL_LABELS, Plan
from llmtop.fleet.rows import target_name
from llmtop.model import EngineRow
from llmtop.sources.prometheus import parse_value

__all__ = ["StateInfo", "apply_states", "down_errors", "gone_row", "read_state"]

GroupKey = tuple[str, ...]


@dataclass(slots=True)
class StateInfo:
    """The ``state`` answers by row group (and model)."""

    inventory: dict[tuple[GroupKey, str], tuple[str, dict[str, str]]] = field(
        default_factory=dict)
    """(group, model) -> (engine, labels) of every instance seen in the lookback."""
    last_ts: dict[tuple[GroupKey, str], float] = field(default_factory=dict)
    up: dict[GroupKey, list[int]] = field(default_factory=dict)
    """group -> [targets down, targets]."""
    down_labels: dict[GroupKey, dict[str, str]] = field(default_factory=dict)
    restarts: dict[GroupKey, float] = field(default_factory=dict)


def read_state(items: list[dict[str, Any]], group: tuple[str, ...]) -> StateInfo:
    """Sort the tagged answers of the ``state`` query by group."""
    out = StateInfo()
    for item in items:
        metric = dict(item.get("metric") or {})
        tag = metric.pop("llmtop_name", "")
        v = parse_value((item.get("value") or [0, "nan"])[1])
        gkey = tuple(metric.get(g, "") for g in group)
        model = next((metric[m] for m in MODEL_LABELS if metric.get(m)), "default")
        if model == "undefined" and tag.endswith(":trtllm"):
            # trtllm-serve labels every series model_name="undefined" (openai_server.py); its
            # adapter reads that as the default model, so must the inventory (else a 2nd row)
            model = "default"
        if tag.startswith("inventory:"):
            out.inventory[(gkey, model)] = (tag.split(":", 1)[1], metric)
        elif math.isnan(v):
            continue
        elif tag.startswith("last_ts:"):
            out.last_ts[(gkey, model)] = max(v, out.last_ts.get((gkey, model), v))
        elif tag == "up":
            counts = out.up.setdefault(gkey, [0, 0])
            counts[0] += v == 0
            counts[1] += 1
            if v == 0:
                out.down_labels[gkey] = metric
        elif tag == "restarts":
            out.restarts[gkey] = max(v, out.restarts.get(gkey, v))
    return out


def down_errors(body: dict[str, Any], down: dict[GroupKey, dict[str, str]]
                ) -> dict[GroupKey, str]:
    """The last scrape error of each down group, from ``/api/v1/targets``' answer (``down``:
    the group's labels from ``read_state``), matched by job and instance; a group whose
    target says no error is left out (its row says ``up == 0``)."""
    out: dict[GroupKey, str] = {}
    want = {(m.get("job", ""), m.get("instance", "")): k for k, m in down.items()}
    for tg in (body.get("data") or {}).get("activeTargets") or []:
        labels = tg.get("labels") or {}
        k = want.get((labels.get("job", ""), labels.get("instance", "")))
        if k is not None and tg.get("lastError"):
            out[k] = f"down: {tg['lastError']}"
    return out


def apply_states(rows: list[EngineRow], info: StateInfo, errors: dict[GroupKey, str],
                 plan: Plan, t: float, stale_after_s: float) -> None:
    """Set each row's state (in place) and append rows for instances without series."""
    group = plan.group
    have = {(tuple(r.labels.get(g, "") for g in group) if r.labels else (), r.model)
            for r in rows}
    for r in rows:
        gkey = tuple((r.labels or {}).get(g, "") for g in group)
        ts = info.last_ts.get((gkey, r.model or "default"))
        if ts is not None:
            r.last_ok_age_s = max(0.0, t - ts)
        n_down, n_all = info.up.get(gkey, (0, 0))
        if n_all and n_down == n_all:
            r.state, r.error = "down", errors.get(gkey) or "up == 0"
        elif r.last_ok_age_s is not None and r.last_ok_age_s > stale_after_s:
            r.state = "stale"
            r.error = f"newest sample {r.last_ok_age_s:.0f} s old"
        elif info.restarts.get(gkey, 0) > 0:
            r.state, r.error = "restarted", "process_start_time_seconds changed"
        elif n_down:  # a group of several targets (--group-by job): some are down
            r.error = f"{n_down} of {n_all} targets down"
    engines_of: dict[str, set[str]] = {}
    for e, m in info.inventory.values():
        engines_of.setdefault(m.get("job", ""), set()).add(e)
    for r in rows:
        if r.labels and r.labels.get("job") and r.engine:
            engines_of.setdefault(r.labels["job"], set()).add(r.engine)
    job_engine = {j: next(iter(es)) for j, es in engines_of.items() if len(es) == 1}
    for (gkey, model), (engine, metric) in sorted(info.inventory.items()):
        if (gkey, model) in have:
            continue
        have.add((gkey, model))
        n_down, n_all = info.up.get(gkey, (0, 0))
        down = bool(n_all) and n_down == n_all
        rows.append(gone_row(group, gkey, model, engine, metric.get("job"), down,
                             (errors.get(gkey) or "up == 0") if down else
                             f"no samples now (seen in the last {plan.lookback_s / 60:.0f} min)"))
    seen_groups = {g for g, _m in have}
    for gkey, metric in sorted(info.down_labels.items()):
        if gkey in seen_groups:
            continue  # a target of an engine job that never exposed engine series
        job = metric.get("job")
        rows.append(gone_row(group, gkey, None, job_engine.get(job or "") or None, job, True,
                             errors.get(gkey) or "up == 0"))


def gone_row(group: tuple[str, ...], gkey: GroupKey, model: str | None, engine: str | None,
             job: str | None, down: bool, error: str) -> EngineRow:
    """A row for an instance without current series: ``down`` or ``stale``, values None."""
    labels = {g: v for g, v in zip(group, gkey, strict=True) if v}
    if job:
        labels["job"] = job
    name = target_name(labels, group)
    return EngineRow(key=f"{name}|{model or ''}", target=name, engine=engine, model=model,
                     labels=labels, state="down" if down else "stale", error=error)
