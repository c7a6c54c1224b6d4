"""Record and replay fleet mode: each refresh's raw query answers, replayed through the same
row builder (``FleetMonitor.assemble``).

A fleet recording is a recording file (``llmtop/record/frames.py``) whose header has
``schema`` 2 and ``mode: "fleet"``; each refresh is one ``fq`` record holding the evaluation
time, the window and scrape interval in use, the row group, the source (kind, URL without
credentials, version), the warnings, PARTIAL, the answers of every per-refresh query
(``ans``: role -> the API's ``result`` list, as received), the bucket layouts the buckets
are filled back from (``lay``, ``Plan.layouts``) and the down targets' scrape errors
(``errs``); a refresh that failed is an ``fq`` record with ``err`` instead. Replaying
a record runs the same code as the live refresh after its HTTP answers, so ``llmtop replay F
--at T --once --json`` prints the rows a live ``--once`` printed at T. Credentials never
reach a record (the URL is the monitor's ``display_url``; headers are not recorded).

The diagnosis' warm-up (``llmtop.fleet.warm``) is recorded too, as one ``fw`` record per
warm-up: the same fields, ``w`` the evaluation time of the refresh it warms, its range
(``start``, ``end``, ``step``), the number of queries sent (``q``), and the answers of its
range queries (``ans``: role -> the API's ``result`` list, with ``values``) or its failure
(``werr``, in words). Replay rebuilds the baseline from them with the live code
(``warm.from_answers``). A header with ``warmup: true`` says the recording keeps them;
recordings made before (no such field) still replay, with a cold baseline, said in words.
The header's ``schema`` stays 2: an ``fw`` record is one more kind, which earlier readers
skip (they read ``fq`` records only).

Nothing here knows the monitor: it passes the values a record holds (``refresh_base``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson

from llmtop.config import Config
from llmtop.fleet.queries import Layouts, Plan

if TYPE_CHECKING:
    from llmtop.record.reader import Recording
    from llmtop.sources.prometheus import PromError

__all__ = ["FLEET_SCHEMA", "fleet_error_record", "fleet_header", "fleet_record", "is_fleet",
           "keeps_warmups", "layouts_of", "refresh_base", "refresh_times", "role_of",
           "warm_record"]

FLEET_SCHEMA = 2
"""Recording schema of fleet mode (direct-mode recordings stay schema 1)."""


def role_of(results: dict[str, list[dict[str, Any]]], name: str) -> list[dict[str, Any]]:
    """The answer series of one role (``gauges``...), split unions (``gauges#1``) joined."""
    return [it for k, r in results.items() if k.split("#")[0] == name for it in r]


def fleet_header(config: Config) -> dict[str, Any]:
    """Header fields of a fleet recording (no credentials: URL from ``display_url``)."""
    from llmtop.sources.prometheus import display_url

    p = config.prometheus
    assert p is not None
    return {"schema": FLEET_SCHEMA, "mode": "fleet", "warmup": True,
            "prometheus": {"url": display_url(p.url), "match": p.match,
                           "group_by": list(p.group_by) if p.group_by else None}}


def keeps_warmups(rec: Recording) -> bool:
    """Whether the recording was made by an llmtop that records the warm-up (``fw``)."""
    return bool(rec.header.get("warmup"))


def refresh_base(t: float, *, window_s: float, scrape_interval_s: float, plan: Plan | None,
                 source: dict[str, Any], warnings: list[str], partial: bool
                 ) -> dict[str, Any]:
    """The fields every ``fq``/``fw`` record holds: the evaluation time ``t``, the window
    and scrape interval, the row group, the source (no credentials), warnings, PARTIAL and
    the bucket layouts."""
    return {"k": "fq", "w": t, "m": time.monotonic(), "win": window_s,
            "si": scrape_interval_s, "grp": list(plan.group) if plan else None,
            "look": plan.lookback_s if plan else None, "src": dict(source),
            "warn": list(warnings), "part": partial,
            "lay": {n: [repr(b) for b in bounds] for n, bounds in plan.layouts.items()}
            if plan else {}}


def layouts_of(r: dict[str, Any]) -> Layouts:
    """A record's bucket layouts (``Plan.layouts``): its buckets were asked below their
    count and are filled back from these. Empty for records made before layouts existed."""
    out = Layouts()
    for name, bounds in (r.get("lay") or {}).items():
        try:
            out[name] = tuple(float(b) for b in bounds)
        except (TypeError, ValueError):
            continue
    return out


def fleet_record(base: dict[str, Any], results: dict[str, list[dict[str, Any]]]
                 ) -> dict[str, Any]:
    """One refresh's record (``base``: ``refresh_base``); the answers are copied (the row
    builder consumes its input)."""
    rec = dict(base)
    rec["ans"] = orjson.loads(orjson.dumps(results))
    return rec


def fleet_error_record(base: dict[str, Any], err: PromError | None) -> dict[str, Any]:
    """A refresh that failed: its error state (no answers)."""
    rec = dict(base)
    rec["err"] = {"kind": err.kind, "message": err.message,
                  "http_status": err.http_status} if err else None
    return rec


def warm_record(base: dict[str, Any], *, start: float | None, end: float | None,
                step_s: float, queries: int, answers: dict[str, list[dict[str, Any]]],
                warnings: list[str], error: str | None) -> dict[str, Any]:
    """One warm-up's record (``base``: ``refresh_base`` at the refresh it warms): its range
    and the raw answers of its range queries (kept as received), or its error in words."""
    rec = dict(base)
    rec.update({"k": "fw", "start": start, "end": end, "step": step_s, "q": queries,
                "ans": answers, "warn": list(warnings), "part": bool(warnings),
                "werr": error})
    return rec


def is_fleet(rec: Recording) -> bool:
    """Whether a recording holds fleet mode's refreshes."""
    return rec.header.get("mode") == "fleet"


def refresh_times(rec: Recording) -> list[float]:
    """Evaluation times of the recorded refreshes, in order."""
    return [r["w"] for r in rec.records if r.get("k") == "fq"]
