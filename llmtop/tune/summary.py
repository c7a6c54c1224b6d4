"""The answer of a search: trials ranked by the objective, the best with its start command
and why, the Pareto fronts, and the capacity sentence of each trial."""

from __future__ import annotations

from typing import Any

from llmtop.tune.limiter import is_rate, load_text
from llmtop.units import DASH

__all__ = ["COLUMNS", "LIMITER_WORDS", "capacity_sentence", "pareto", "ranked", "score",
           "summarize", "table_rows", "trial_port_text"]

LIMITER_WORDS = {"kv": "KV-bound", "seats": "seat-bound", "compute": "compute-bound",
                 "errors": "errors", "client": "client-bound", "under_driven": "under-driven",
                 "none": DASH}


def score(t: dict[str, Any], objective: str) -> float | None:
    """Higher is better: goodput per GPU at the SLOs, output tok/s per GPU at the SLA
    boundary for cost (the cheapest $/1M tokens), or max output tok/s per GPU."""
    if t["status"] != "measured":
        return None
    gpus = t.get("gpus") or 1.0
    if objective == "throughput":
        v = t.get("max_output_tok_s")
    elif objective == "cost":
        v = t.get("output_tok_s")
    else:
        v = t.get("goodput_rps")
    return None if v is None else v / gpus


def ranked(trials: list[dict[str, Any]], objective: str) -> list[dict[str, Any]]:
    """Measured trials with a score, best first."""
    have = [t for t in trials if score(t, objective) is not None]
    return sorted(have, key=lambda t: -(score(t, objective) or 0.0))


def pareto(trials: list[dict[str, Any]], cost_key: str) -> list[int]:
    """Indexes (into ``trials``) of the front of output tok/s per GPU (higher) against
    ``cost_key`` (lower: ``ttft_p95_s`` or ``cost_per_mtok_usd``)."""
    pts = [(i, (t.get("per_gpu") or {}).get("output_tok_s"), t.get(cost_key))
           for i, t in enumerate(trials)]
    pts = [(i, x, y) for i, x, y in pts if x is not None and y is not None]
    return sorted(i for i, x, y in pts
                  if not any((x2 >= x and y2 <= y) and (x2 > x or y2 < y)
                             for _j, x2, y2 in pts))


def _slo_text(slo: dict[str, float | None]) -> str:
    parts = [f"{k.upper()} p95 ≤ {1000 * v:.0f} ms" for k, v in slo.items() if v is not None]
    return " and ".join(parts) or "no SLO set"


def capacity_sentence(t: dict[str, Any], slo: dict[str, float | None]) -> str:
    """"holds c=8 (11 req/s, 900 tok/s) at TTFT p95 ≤ 500 ms; limited by ..."."""
    lim = t["limiter"]
    if t["status"] != "measured":
        return f"{t['status']}: {t.get('reason') or '–'}"
    why = f"limited by {lim['evidence']}" if lim["kind"] not in ("none",) else "no limiter seen"
    if t.get("sla_load") is None:
        return f"meets the SLOs at no load tried ({_slo_text(slo)}); {why}"
    rps = t.get("goodput_rps")
    tok = t.get("output_tok_s")
    at = load_text(t["sla_load"], is_rate(t))
    return (f"holds {at} ({'–' if rps is None else f'{rps:.2f}'} req/s, "
            f"{'–' if tok is None else f'{tok:.0f}'} output tok/s) at {_slo_text(slo)}; {why}")


def summarize(trials: list[dict[str, Any]], objective: str, slo: dict[str, float | None]
              ) -> dict[str, Any]:
    """``best``, ``ranking`` (indexes) and ``pareto`` for the report."""
    for t in trials:
        t["capacity"] = capacity_sentence(t, slo)
        t["score"] = score(t, objective)
    order = ranked(trials, objective)
    idx = [trials.index(t) for t in order]
    best = None
    if order:
        b = order[0]
        best = {"params": b["params"], "command": b["command"], "trial": idx[0],
                "trial_port": b.get("port"), "trial_command": b.get("trial_command"),
                "score": b["score"], "sla_boundary": b.get("sla_boundary"),
                "why": (f"best {objective} per GPU of {len(order)} measured configurations: "
                        f"{b['capacity']}")}
    return {"best": best, "ranking": idx,
            "pareto": {"ttft": pareto(trials, "ttft_p95_s"),
                       "cost": pareto(trials, "cost_per_mtok_usd")}}


COLUMNS = (("rank", "#"), ("params", "configuration"), ("status", "status"),
           ("sla_load", "SLA load"), ("goodput", "goodput/GPU req/s"),
           ("tok_s", "out tok/s"), ("ttft95", "TTFT p95 ms"), ("cost", "$/1M tok"),
           ("cold", "cold start s"), ("limiter", "limiter"), ("why", "evidence / reason"))
"""The table's columns (key, header), shared by the console, the CSV and the HTML."""


def _fmt(v: float | None, digits: int = 1, scale: float = 1.0) -> str:
    return DASH if v is None else f"{v * scale:.{digits}f}"


def trial_port_text(best: dict[str, Any]) -> str | None:
    """"the trial ran it on port 45187" where the trial's port differs from the command's
    (a ``{port}`` the tuner filled in), else None."""
    port = best.get("trial_port")
    if port is None or "{port}" not in (best.get("command") or ""):
        return None
    return f"the trial ran it on port {port}, a free port picked for the trial"


def table_rows(report: dict[str, Any]) -> list[dict[str, str]]:
    """One row of text per trial: measured ones by rank, then failed, then skipped."""
    trials = report["trials"]
    rank = {i: r + 1 for r, i in enumerate(report.get("ranking") or [])}
    order = [*(report.get("ranking") or []),
             *(i for i, t in enumerate(trials) if i not in rank and t["status"] != "skipped"),
             *(i for i, t in enumerate(trials) if i not in rank and t["status"] == "skipped")]
    out = []
    for i in order:
        t = trials[i]
        lim = t["limiter"]
        measured = t["status"] == "measured"
        out.append({
            "index": str(i), "rank": str(rank.get(i, DASH)), "command": t["command"],
            "trial_port": DASH if t.get("port") is None else str(t["port"]),
            "params": ", ".join(f"{k}={v}" for k, v in t["params"].items()),
            "status": t["status"] + (" (resumed)" if t.get("resumed") else ""),
            "sla_load": load_text(t.get("sla_load"), is_rate(t)),
            "goodput": _fmt((t.get("per_gpu") or {}).get("goodput_rps"), 2),
            "tok_s": _fmt(t.get("output_tok_s"), 0), "ttft95": _fmt(t.get("ttft_p95_s"), 0, 1000),
            "cost": _fmt(t.get("cost_per_mtok_usd"), 2), "cold": _fmt(t.get("cold_start_s"), 1),
            "limiter": LIMITER_WORDS.get(lim["kind"], lim["kind"]) if measured else DASH,
            "why": lim["evidence"] if measured else (t.get("reason") or DASH)})
    return out
