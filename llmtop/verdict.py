"""One-line health verdict for the header: named, pure, tested rules.

Each rule looks at one ``EngineRow`` (or the GPUs) and returns ``Finding`` objects. The verdict
is the worst level found, with the findings of the worst target first; OK-level findings are
notes (a GPU at its power cap) that follow the rest::

    DEGRADED — vllm@:8000 KV 97% · waiting 31 · preempting 4/s
    CRITICAL — vllm@:8000 routing → queueing · waiting 10 (+4/min)
    OK — 3 engines healthy
    OK — 1 engine healthy · GPU0 power cap

No I/O, no clock, no UI library. Thresholds come from ``config.Thresholds``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmtop.config import Thresholds
from llmtop.model import EngineRow, GpuRecord, Snapshot
from llmtop.units import secs as _fmt_s

__all__ = [
    "CRIT",
    "DIAGNOSIS_RULE",
    "LEVEL_NAMES",
    "OK",
    "RULES",
    "WARN",
    "Finding",
    "Verdict",
    "cause_and_effect",
    "compute_verdict",
    "diagnosis_findings",
    "growth_per_min",
    "growth_points",
    "log_words",
    "rule_errors",
    "rule_gpu_throttle",
    "rule_kv_pressure",
    "rule_preemptions",
    "rule_queue_growth",
    "rule_target_state",
    "rule_ttft_slo",
    "short_target",
]

OK, WARN, CRIT = 0, 1, 2
LEVEL_NAMES = {OK: "OK", WARN: "DEGRADED", CRIT: "CRITICAL"}

BAD_STATES = {
    "down": "DOWN",
    "http_error": "HTTP error",
    "unauthorized": "UNAUTHORIZED",
    "bad_payload": "BAD PAYLOAD",
}
"""Target states that mean no fresh data at all (critical)."""

BENIGN_THROTTLE = frozenset({"idle", "gpu idle", "applications clocks setting", "none"})
"""Clock-event reasons that are not a performance problem."""

NOTE_THROTTLE = frozenset({"power cap", "sync boost", "display clocks setting"})
"""Clock-event reasons that are the normal state of a busy GPU: a note, not DEGRADED. A real
H100 under full load runs at its 700 W limit with ``power cap`` set all the time (SM clock
1290-1305 of 1980 MHz, 2026-11-22); thermal and hardware slowdowns stay warnings."""

WAITING_MIN_FOR_GROWTH = 1.0
"""Queue growth is only reported while at least this many requests wait."""

QUEUE_SPIKE_MIN = 10.0
"""A queue this long counts as growing even if it was empty moments ago (a burst)."""

SPIKE_HOLD_S = 5.0
"""How long a burst must hold ``QUEUE_SPIKE_MIN`` or more to be measured from the queue's
last empty moment (the default demo's Triton blips to 12 for one refresh)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One fired rule: who, how bad, and a few words for the header."""

    rule: str
    level: int
    target: str | None
    text: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The header line and the findings behind it."""

    level: int
    text: str
    findings: tuple[Finding, ...] = ()

    @property
    def name(self) -> str:
        return LEVEL_NAMES[self.level]


def short_target(name: str) -> str:
    """``vllm@127.0.0.1:8000`` -> ``vllm@:8000`` (loopback hosts are implied)."""
    for host in ("127.0.0.1", "localhost", "[::1]"):
        name = name.replace(f"@{host}:", "@:")
        if name.startswith(f"{host}:"):
            name = name[len(host):]
    return name


def growth_points(interval_s: float) -> int:
    """How many newest points ``growth_per_min`` reads: one minute's worth, at least 3."""
    return max(3, round(60.0 / interval_s)) if interval_s > 0 else 3


def growth_per_min(values: Sequence[float | None], interval_s: float) -> float | None:
    """Least-squares slope of the last minute of ``values`` (one per interval), per minute.

    Gaps (None) are skipped. None while less than half a minute of points is known (a fresh
    start is not a trend), and when a small queue (newest value under ``QUEUE_SPIKE_MIN``)
    emptied in the last 20 s: a queue that comes and drains is not growing, whatever its
    slope. A burst (newest value ``QUEUE_SPIKE_MIN`` or more) is measured from the queue's
    last empty moment in the minute.
    """
    if interval_s <= 0:
        return None
    n_keep = growth_points(interval_s)
    tail = values[-n_keep:]
    pts = [(i * interval_s, v) for i, v in enumerate(tail) if v is not None]
    if len(pts) < max(3, n_keep // 2):
        return None
    recent = [v for v in tail[-max(1, n_keep // 3):] if v is not None]
    if not recent or (recent[-1] < QUEUE_SPIKE_MIN and min(recent) < WAITING_MIN_FOR_GROWTH):
        return None
    # a burst (QUEUE_SPIKE_MIN+ held for SPIKE_HOLD_S) after an empty moment is a new queue:
    # its trend starts at that moment, not with a drained burst before it (which would make
    # it read as shrinking); a one-sample blip is not a burst
    empty = max((i for i, (_, v) in enumerate(pts) if v < WAITING_MIN_FOR_GROWTH), default=None)
    if empty is not None:
        since = pts[empty:]
        held = since[1:]
        if (held and all(v >= QUEUE_SPIKE_MIN for _, v in held)
                and held[-1][0] - held[0][0] >= SPIKE_HOLD_S):
            pts = since
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    if den == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in pts) / den * 60.0


def _fmt_rate(v: float) -> str:
    return f"{v:.0f}/s" if v >= 10 or v == int(v) else f"{v:.1f}/s"


_MODULE_PATH = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Z]\w*:)")
"""``vllm.v1.engine.exceptions.`` before an exception's name: cut in the one-line verdict."""


def log_words(row: EngineRow) -> str | None:
    """The engine's own line that explains its state (``LogSummary.cause``, chosen by
    ``history.logs``): ``log: EngineDeadError: ...``; None when no log line explains it."""
    cause = row.log.cause if row.log is not None else None
    if cause is None:
        return None
    return "log: " + _MODULE_PATH.sub("", " ".join(cause.headline.split()))


def rule_target_state(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """A target that is down, unreadable, stale or freshly restarted; with the engine's log
    line that explains it, when one does (``DOWN — log: EngineDeadError: ...``)."""
    why = log_words(row)
    tail = f" \u2014 {why}" if why else ""
    if row.state in BAD_STATES:
        word = BAD_STATES[row.state]
        if row.state == "http_error" and row.http_status:
            word = f"HTTP {row.http_status}"
        return [Finding("target_state", CRIT, row.target, word + tail)]
    if row.state == "stale":
        age = f" {row.last_ok_age_s:.0f}s" if row.last_ok_age_s is not None else ""
        return [Finding("target_state", WARN, row.target, f"STALE{age}{tail}")]
    if row.state == "restarted":
        return [Finding("target_state", WARN, row.target, "restarted" + tail)]
    return []


def rule_kv_pressure(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """KV cache usage at or above ``kv_warn`` / ``kv_crit``."""
    kv = row.kv_cache_usage
    if kv is None or kv < th.kv_warn:
        return []
    level = CRIT if kv >= th.kv_crit else WARN
    return [Finding("kv_pressure", level, row.target, f"KV {kv * 100:.0f}%")]


def rule_queue_growth(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """Waiting requests growing faster than ``queue_growth_warn`` per minute.

    ``ctx["waiting_growth"]`` maps row keys to growth per minute (see ``growth_per_min``).
    Under KV pressure or preemption a non-empty queue is reported too, as context.
    """
    w = row.waiting
    if w is None or w < WAITING_MIN_FOR_GROWTH:
        return []
    growth = (ctx.get("waiting_growth") or {}).get(row.key)
    if growth is not None and growth > th.queue_growth_warn:
        return [Finding("queue_growth", WARN, row.target, f"waiting {w:.0f} (+{growth:.0f}/min)")]
    kv = row.kv_cache_usage
    if (kv is not None and kv >= th.kv_warn) or (row.preemptions_per_s or 0) > 0:
        return [Finding("queue_growth", WARN, row.target, f"waiting {w:.0f}")]
    return []


def rule_preemptions(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """Any preemption (vLLM) or retraction (SGLang) in the window."""
    p = row.preemptions_per_s
    if p is None or p <= 0:
        return []
    return [Finding("preemptions", WARN, row.target, f"preempting {_fmt_rate(p)}")]


def rule_errors(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """Failed requests in the window."""
    e = row.errors_per_s
    if e is None or e <= 0:
        return []
    return [Finding("errors", WARN, row.target, f"errors {_fmt_rate(e)}")]


def rule_ttft_slo(row: EngineRow, th: Thresholds, ctx: Mapping) -> list[Finding]:
    """TTFT p95 (and ITL p95) above the configured SLO."""
    out = []
    for q, slo, label, rule in (
        (row.ttft_s, th.ttft_slo_s, "TTFT", "ttft_slo"),
        (row.itl_s, th.itl_slo_s, "ITL", "itl_slo"),
    ):
        v = q.p95 if q is not None else None
        if v is not None and slo and v > slo:
            out.append(Finding(rule, WARN, row.target, f"{label} p95 {_fmt_s(v)} > {_fmt_s(slo)}"))
    return out


def rule_gpu_throttle(gpus: Sequence[GpuRecord], th: Thresholds) -> list[Finding]:
    """GPUs whose clocks are held down for a reason other than idling (a warning; a power cap
    alone is an OK-level note), or that failed."""
    out = []
    for g in gpus:
        if g.error:
            out.append(Finding("gpu_throttle", WARN, None, f"GPU{g.index} {g.error}"))
            continue
        reasons = [r for r in (g.throttle or []) if r.lower() not in BENIGN_THROTTLE]
        if reasons:
            level = OK if all(r.lower() in NOTE_THROTTLE for r in reasons) else WARN
            out.append(Finding("gpu_throttle", level, None, f"GPU{g.index} {', '.join(reasons)}"))
    return out


DIAGNOSIS_RULE = "diagnosis"
"""``Finding.rule`` of a verdict word that names an engine's top diagnosis finding."""
_SEVERITY_LEVEL = {"warn": WARN, "critical": CRIT}


def cause_and_effect(diagnosis: Sequence[Any]) -> list[tuple[Any, Any | None]]:
    """Per engine, in the diagnosis' order: its first warn/critical finding (the root cause,
    as ``w`` lists it first) and the worst warn/critical finding that one explains
    (``explains``; ties in the list's order), or None (duck-typed ``diagnose.Finding``)."""
    roots: dict[str, Any] = {}
    by_target: dict[str, list[Any]] = {}
    for f in diagnosis:
        if getattr(f, "severity", "") not in _SEVERITY_LEVEL:
            continue
        by_target.setdefault(f.target, []).append(f)
        roots.setdefault(f.target, f)
    out: list[tuple[Any, Any | None]] = []
    for target, root in roots.items():
        explained = set(getattr(root, "explains", ()) or ())
        effects = [f for f in by_target[target] if f is not root and f.rule in explained]
        worst = max(effects, key=lambda f: _SEVERITY_LEVEL[f.severity], default=None)
        out.append((root, worst))
    return out


def diagnosis_findings(diagnosis: Sequence[Any]) -> list[Finding]:
    """One verdict word per engine: its root cause's rule id, and the worst finding it
    explains after an arrow (``routing → queueing``), at the worse of the two levels
    (``cause_and_effect``)."""
    out: list[Finding] = []
    for root, effect in cause_and_effect(diagnosis):
        level = _SEVERITY_LEVEL[root.severity]
        text = root.rule
        if effect is not None:
            level = max(level, _SEVERITY_LEVEL[effect.severity])
            text = f"{root.rule} \u2192 {effect.rule}"
        out.append(Finding(DIAGNOSIS_RULE, level, root.target, text))
    return out


RowRule = Callable[[EngineRow, Thresholds, Mapping], list[Finding]]
RULES: tuple[RowRule, ...] = (
    rule_target_state,
    rule_kv_pressure,
    rule_queue_growth,
    rule_preemptions,
    rule_ttft_slo,
    rule_errors,
)
"""Per-row rules, in the order their words appear in the header."""


def compute_verdict(
    snapshot: Snapshot | None,
    thresholds: Thresholds | None = None,
    *,
    waiting_growth: Mapping[str, float] | None = None,
    diagnosis: Sequence[Any] | None = None,
    source_problem: str | None = None,
) -> Verdict:
    """Run every rule over a snapshot and summarize in one line.

    ``diagnosis`` (``llmtop.diagnose`` findings, root cause first per engine) names each
    engine's top warn/critical finding first among that engine's words, with the worst
    finding it explains after an arrow, and raises the level to the worse of their
    severities."""
    th = thresholds or Thresholds()
    if source_problem:  # fleet mode: the server itself failed (unreachable, 401, bad --match)
        if snapshot is None or not snapshot.engines:
            return Verdict(CRIT, f"NO DATA — {source_problem}")
        return Verdict(WARN, f"{source_problem} · rows from the last good refresh")
    if snapshot is None:
        return Verdict(OK, "WAITING — first scrape…")
    ctx = {"waiting_growth": waiting_growth or {}}
    findings: list[Finding] = []
    targets: list[str] = []
    for row in snapshot.engines:
        if row.target not in targets:
            targets.append(row.target)
        for rule in RULES:
            findings.extend(rule(row, th, ctx))
    findings.extend(rule_gpu_throttle(snapshot.gpus, th))
    findings.extend(diagnosis_findings(diagnosis or ()))
    if any(f.level > OK for f in findings):
        return _summarize(findings)
    notes = "".join(f" · {f.text}" for f in findings)  # OK-level findings only, or none
    if not snapshot.engines:
        return Verdict(OK, f"NO ENGINES — nothing to monitor yet{notes}", tuple(findings))
    n = len(targets)
    return Verdict(OK, f"OK — {n} engine{'s' if n != 1 else ''} healthy{notes}", tuple(findings))


def _summarize(findings: list[Finding]) -> Verdict:
    level = max(f.level for f in findings)
    by_target: dict[str | None, list[Finding]] = {}
    for f in findings:
        by_target.setdefault(f.target, []).append(f)
    # worst target first; ties keep discovery order
    order = sorted(by_target, key=lambda t: -max(f.level for f in by_target[t]))
    parts = []
    for t in order:
        words: list[str] = []
        # the top diagnosis finding first, then problems, then notes
        for f in sorted(by_target[t], key=lambda f: (f.rule != DIAGNOSIS_RULE, -f.level)):
            if f.text not in words:
                words.append(f.text)
        head = f"{short_target(t)} " if t else ""
        parts.append(head + " · ".join(words))
    text = f"{LEVEL_NAMES[level]} — " + " | ".join(parts)
    return Verdict(level, text, tuple(findings))
