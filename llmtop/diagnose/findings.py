"""The diagnosis' value types and its ordering: root cause first, then severity; each finding
names the findings it explains (``Finding.explains``).

Pure: no I/O, no clock, no UI library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "EXPLAINS",
    "RULE_IDS",
    "SEVERITIES",
    "Evidence",
    "Finding",
    "order_findings",
    "severity_rank",
]

SEVERITIES = ("info", "warn", "critical")

RULE_IDS = (
    "stuck",
    "warming_up",
    "gpu_throttle",
    "kv_pressure",
    "gpu_bound",
    "gpu_idle",
    "long_prompts",
    "prefix_cache_miss",
    "spec_decode_drop",
    "routing",
    "pd_balance",
    "kv_transfer",
    "imbalance",
    "errors",
    "near_capacity",
    "queueing",
    "decode_slowdown",
    "ttft_rise",
    "aborts",
)
"""Every rule id, in tie-break order (causes before the symptoms they explain)."""

EXPLAINS: dict[str, frozenset[str]] = {
    "warming_up": frozenset({"prefix_cache_miss", "ttft_rise", "queueing"}),
    "kv_pressure": frozenset({"queueing", "decode_slowdown", "ttft_rise", "aborts",
                              "prefix_cache_miss", "gpu_idle"}),
    "long_prompts": frozenset({"ttft_rise", "queueing", "decode_slowdown", "gpu_bound"}),
    "prefix_cache_miss": frozenset({"ttft_rise", "queueing", "decode_slowdown", "gpu_bound"}),
    "gpu_throttle": frozenset({"decode_slowdown", "ttft_rise", "gpu_bound", "gpu_idle"}),
    "gpu_bound": frozenset({"queueing", "ttft_rise", "decode_slowdown"}),
    "gpu_idle": frozenset({"queueing", "ttft_rise", "decode_slowdown"}),
    "spec_decode_drop": frozenset({"decode_slowdown"}),
    "imbalance": frozenset({"queueing", "ttft_rise", "gpu_bound", "gpu_idle"}),
    "near_capacity": frozenset({"queueing", "ttft_rise"}),
    "queueing": frozenset({"ttft_rise", "aborts"}),
    "decode_slowdown": frozenset({"aborts"}),
    "errors": frozenset(),
    "stuck": frozenset({"queueing", "ttft_rise", "near_capacity", "decode_slowdown",
                        "aborts", "imbalance", "routing", "gpu_idle"}),
    "routing": frozenset({"imbalance", "queueing", "ttft_rise", "errors", "gpu_bound",
                          "gpu_idle"}),
    "pd_balance": frozenset({"queueing", "ttft_rise", "decode_slowdown", "kv_pressure",
                             "gpu_bound", "gpu_idle"}),
    "kv_transfer": frozenset({"ttft_rise", "queueing", "errors"}),
}
"""cause -> the findings it explains (on the same engine). An explained finding follows its
cause whatever their severities. A prefix-cache collapse explains a decode slowdown as longer
prompts do: the cached tokens are computed again, and a prefill batch runs between decode
steps (SGLang's default, vLLM without chunked prefill), so each token waits for them (real
SGLang, 2 clients: ITL p50 43 ms vs 9 ms while prefill p95 rose 163 -> 404 ms)."""


def _num(v: float | None) -> float | None:
    if v is None or isinstance(v, bool):
        return v
    return None if (math.isnan(v) or math.isinf(v)) else v


@dataclass(frozen=True, slots=True)
class Evidence:
    """One signal a rule used: its value over the window, the engine's usual value
    (baseline, None when none yet) and the threshold it was compared with."""

    signal: str
    value: float | str | None
    window: str
    baseline: float | None = None
    threshold: float | str | None = None

    def to_json(self) -> dict[str, Any]:
        v = self.value if isinstance(self.value, str) else _num(self.value)
        th = self.threshold if isinstance(self.threshold, str) else _num(self.threshold)
        return {"signal": self.signal, "value": v, "window": self.window,
                "baseline": _num(self.baseline), "threshold": th}


@dataclass(frozen=True, slots=True)
class Finding:
    """One cause (or symptom) named for one engine, with numbers, evidence and an action."""

    rule: str
    severity: str
    target: str
    model: str | None
    summary: str
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)
    action: str = ""
    explains: tuple[str, ...] = ()
    """The rules of the findings on the same target that this one is the cause of
    (``EXPLAINS``), as present now, in the order ``order_findings`` gives them; set by
    ``order_findings`` (the Why screen, the header's verdict and ``--once`` read it)."""

    @property
    def key(self) -> tuple[str, str, str | None]:
        """Identity across refreshes (for hysteresis and the event log)."""
        return (self.rule, self.target, self.model)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "target": self.target,
            "model": self.model,
            "summary": self.summary,
            "evidence": [e.to_json() for e in self.evidence],
            "action": self.action,
            "explains": list(self.explains),
        }


def severity_rank(severity: str) -> int:
    """info 0, warn 1, critical 2 (unknown words count as info)."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        return 0


def _depth(rule: str, present: set[str], seen: frozenset[str] = frozenset()) -> int:
    """How many present causes stand above ``rule`` (longest chain)."""
    best = 0
    for cause, effects in EXPLAINS.items():
        if cause != rule and cause in present and rule in effects and cause not in seen:
            best = max(best, 1 + _depth(cause, present, seen | {rule}))
    return best


def order_findings(findings: Iterable[Finding], targets: list[str] | None = None
                   ) -> list[Finding]:
    """Per engine (in ``targets`` order, else first appearance): root causes first (a
    finding explained by another present on the same engine follows it), then severity,
    then the fixed rule order."""
    by_target: dict[str, list[Finding]] = {}
    for t in targets or []:
        by_target.setdefault(t, [])
    for f in findings:
        by_target.setdefault(f.target, []).append(f)
    out: list[Finding] = []
    for group in by_target.values():
        if not group:
            continue
        present = {f.rule for f in group}
        ordered = sorted(group, key=lambda f: (
            _depth(f.rule, present),
            -severity_rank(f.severity),
            RULE_IDS.index(f.rule) if f.rule in RULE_IDS else len(RULE_IDS),
            f.model or "",
        ))
        out.extend(_with_explains(ordered))
    return out


def _with_explains(ordered: list[Finding]) -> list[Finding]:
    """Each finding with ``explains`` set to the rules it explains among ``ordered`` (one
    target's findings, already in order); unchanged objects where it already holds."""
    rules = list(dict.fromkeys(f.rule for f in ordered))
    out = []
    for f in ordered:
        effects = EXPLAINS.get(f.rule, frozenset())
        ex = tuple(r for r in rules if r != f.rule and r in effects)
        out.append(f if f.explains == ex else replace(f, explains=ex))
    return out
