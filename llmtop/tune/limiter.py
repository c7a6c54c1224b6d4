"""What limited a trial, read from the engine's side (the monitor's rows, folded into the
bake-off's server peaks) and the load generator's own client-bound judgement.

The level judged is the first one past the SLA boundary (where the SLOs broke); when no
level broke, the highest one. The server's evidence comes first: a level with a queue on the
server is not called client-bound, whatever the load generator's own judgement says.
The thresholds are the diagnosis's (``diagnose.thresholds``):
the same numbers name a KV-pressure or a running-at-its-limit finding in the monitor.
"""

from __future__ import annotations

from typing import Any

from llmtop.diagnose.thresholds import KV_FULL, PREEMPT_MIN_EVENTS, RUNNING_AT_LIMIT
from llmtop.units import DASH
from llmtop.units import ms_words as _ms
from llmtop.units import pct_words as _pct

__all__ = ["KINDS", "is_rate", "judged_level", "limiter", "load_text"]

KINDS = ("kv", "seats", "compute", "errors", "client", "under_driven", "none")
ERROR_SHARE = 0.01
"""A level with more failed requests than this is lost to errors."""
KV_ADMIT = 0.80
"""A queue below the seat limit with the KV cache at least this full: the KV cache admits no
more (a new request needs blocks for its whole prompt; the gauge is sampled between steps, so
it rarely shows the 95 % of ``KV_FULL`` while admission is blocked)."""


def load_text(load: float | None, rate: bool = False) -> str:
    """``c=16`` or ``4 req/s``."""
    if load is None:
        return DASH
    return f"{load:g} req/s" if rate else f"c={load:g}"


def is_rate(t: dict[str, Any]) -> bool:
    """Whether a trial's loads are request rates (``load_unit`` "req/s")."""
    return t.get("load_unit") == "req/s"


def judged_level(levels: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The level whose limiter is the trial's: the lowest load that broke the SLOs, else the
    highest measured."""
    done = [lv for lv in levels if lv.get("requests")]
    lost = sorted((lv for lv in done if not lv["met"]), key=lambda lv: lv["load"])
    if lost:
        return lost[0]
    return max(done, key=lambda lv: lv["load"]) if done else None


def limiter(levels: list[dict[str, Any]], seats: float | None, *, rate: bool = False
            ) -> dict[str, Any]:
    """``{"kind", "evidence", "level"}``: the trial's limiter in words and numbers.
    ``seats``: the running limit the engine reported or was given (None: unknown)."""
    lv = judged_level(levels)
    if lv is None:
        return {"kind": "none", "evidence": "no level was measured", "level": None}
    at = load_text(lv["load"], rate)
    kind, ev = _kind(lv, seats, at)
    return {"kind": kind, "evidence": ev, "level": lv["load"]}


def _kind(lv: dict[str, Any], seats: float | None, at: str) -> tuple[str, str]:
    err = lv.get("error_rate") or 0.0
    run, wait, kv = lv.get("running_peak"), lv.get("waiting_peak"), lv.get("kv_peak")
    pre = lv.get("preemptions")
    if err > ERROR_SHARE:
        return "errors", f"{100 * err:.0f} % of requests failed at {at}"
    if (kv is not None and kv >= KV_FULL) or (pre is not None and pre >= PREEMPT_MIN_EVENTS):
        per_s = f" ({pre / lv['duration_s']:.2g}/s)" if pre and lv.get("duration_s") else ""
        return "kv", (f"the KV cache: {_pct(kv)} used, {pre if pre is not None else '–'}"
                      f"{'' if pre is None else ' preemptions'}{per_s} at {at}")
    limit = seats if seats else None
    if not lv["met"] and run is not None and (wait or 0) >= 1 and kv is not None and \
            kv >= KV_ADMIT and (limit is None or run < RUNNING_AT_LIMIT * limit):
        return "kv", (f"the KV cache admits no more: {_pct(kv)} used, {run:.0f} running"
                      f"{'' if limit is None else f' of {limit:.0f} allowed'}, {wait:.0f} "
                      f"waiting at {at}")
    if lv.get("client_bound") and (wait or 0) < 1:
        why = "; ".join(lv.get("client_bound_reasons") or []) or "the load generator lagged"
        return "client", f"the load generator, not the server, was the limit at {at} ({why})"
    if not lv["met"] and run is not None and (wait or 0) >= 1:
        if limit is not None and run >= RUNNING_AT_LIMIT * limit:
            return "seats", (f"the seat limit: running pinned at {run:.0f} of {limit:.0f} "
                             f"with {wait:.0f} waiting and KV {_pct(kv)} used at {at}")
        if limit is None:
            return "seats", (f"the seat limit: running stayed at {run:.0f} with {wait:.0f} "
                             f"waiting and KV {_pct(kv)} used at {at}")
        return "compute", (f"the step is full: {run:.0f} running of {limit:.0f} allowed, "
                           f"{wait:.0f} waiting, KV {_pct(kv)} used at {at} (the token "
                           "budget per step admits no more)")
    if not lv["met"]:
        return "compute", (f"latency rises with load at {at}: TTFT p95 "
                           f"{_ms(lv.get('ttft_p95_s'))}, TPOT p95 {_ms(lv.get('tpot_p95_s'))} "
                           f"with {run if run is None else f'{run:.0f}'} running and no queue")
    return "under_driven", (f"the highest load tried ({at}) still met the SLOs "
                            f"(running peak {'–' if run is None else f'{run:.0f}'}, "
                            f"KV {_pct(kv)})")


