"""Why is it slow: findings that name the cause, with evidence and an action.

Pure layer beside ``history`` (no Textual, no Rich, no I/O, no clock). ``diagnose`` runs the
rules over windowed rows; ``Diagnoser`` adds the baseline and hysteresis over time.
``docs/diagnosis.md`` describes every rule.
"""

from __future__ import annotations

from llmtop.diagnose.baseline import Baseline, BaselineTracker
from llmtop.diagnose.engine import diagnose
from llmtop.diagnose.findings import RULE_IDS, SEVERITIES, Evidence, Finding, order_findings
from llmtop.diagnose.state import Diagnoser, Transition

__all__ = [
    "RULE_IDS",
    "SEVERITIES",
    "Baseline",
    "BaselineTracker",
    "Diagnoser",
    "Evidence",
    "Finding",
    "Transition",
    "diagnose",
    "order_findings",
    "top_per_target",
]


def top_per_target(findings: list[Finding]) -> dict[str, Finding]:
    """The first (root-cause) finding of each target, from an ordered list."""
    out: dict[str, Finding] = {}
    for f in findings:
        out.setdefault(f.target, f)
    return out
