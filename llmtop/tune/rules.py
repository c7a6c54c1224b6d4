"""Search rules: each skips configurations that a measured trial has already ruled out, and
says why in one sentence (like a diagnosis rule). A rule sees one candidate and the trials
done so far; it returns the reason to skip it, or None.

The seat limit is the parameter named like ``max_num_seqs``; the memory parameters are those
that size the KV cache. A rule only compares configurations equal in every other parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from llmtop.tune.limiter import is_rate, load_text

__all__ = ["MEMORY_PARAMS", "NO_KV_WORDS", "OOM_WORDS", "RULES", "SEAT_PARAMS",
           "kv_full_at_fewer_seats", "kv_room_left", "memory_beyond", "no_kv_memory_with_more",
           "oom_with_less_memory", "pair", "seat_bound_with_more_seats", "seats_never_filled",
           "skip_reason"]

SEAT_PARAMS = ("max_num_seqs", "max_running_requests", "max_batch_size", "max_num_seqs_per_dp",
               "parallel", "max_concurrent_requests")
MEMORY_PARAMS = ("gpu_memory_utilization", "mem_fraction_static", "kv_tokens",
                 "kv_cache_free_gpu_memory_fraction", "max_total_tokens",
                 "num_gpu_blocks_override")
KV_ROOM = 0.60
"""KV peaks below this at every level leave memory unused (TUNE.md section 2, rule 2)."""

Trial = dict[str, Any]
Rule = Callable[[dict[str, Any], Trial], "str | None"]


def _name(params: dict[str, Any], names: Iterable[str]) -> str | None:
    return next((n for n in names if n in params), None)


def _same_but(a: dict[str, Any], b: dict[str, Any], name: str) -> bool:
    return all(a[k] == b.get(k) for k in a if k != name) and a.keys() == b.keys()


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def pair(cand: dict[str, Any], t: Trial, names: Iterable[str]
          ) -> tuple[str, float, float] | None:
    """(parameter, candidate's value, trial's value) when they differ only there."""
    n = _name(cand, names)
    if n is None or not _same_but(cand, t["params"], n):
        return None
    a, b = _num(cand[n]), _num(t["params"][n])
    return None if a is None or b is None else (n, a, b)


def _peak(t: Trial, key: str) -> float | None:
    vals = [lv[key] for lv in t.get("levels") or [] if lv.get(key) is not None]
    return max(vals) if vals else None


def kv_full_at_fewer_seats(cand: dict[str, Any], t: Trial) -> str | None:
    """KV-bound at N seats: more seats at the same memory only preempt more."""
    p = pair(cand, t, SEAT_PARAMS)
    if p is None or t["status"] != "measured" or t["limiter"]["kind"] != "kv" or p[1] <= p[2]:
        return None
    return (f"{p[0]}={p[2]:g} was already KV-bound ({t['limiter']['evidence']}); more seats "
            "at the same memory only queue in the KV cache or preempt")


def seats_never_filled(cand: dict[str, Any], t: Trial) -> str | None:
    """Running never reached its limit, though the SLOs broke: a higher limit goes unused."""
    p = pair(cand, t, SEAT_PARAMS)
    if p is None or t["status"] != "measured" or p[1] <= p[2]:
        return None
    if t["limiter"]["kind"] not in ("compute", "kv"):
        return None
    run = _peak(t, "running_peak")
    seats = (t.get("applied") or {}).get("max_running") or p[2]
    if run is None or run >= 0.95 * seats:
        return None
    return (f"with {p[0]}={p[2]:g} running never reached its limit (peak {run:.0f}) before "
            f"the SLOs broke; a higher limit would not be used")


def seat_bound_with_more_seats(cand: dict[str, Any], t: Trial) -> str | None:
    """Seat-bound at N with KV room: fewer seats only hold less."""
    p = pair(cand, t, SEAT_PARAMS)
    if p is None or t["status"] != "measured" or t["limiter"]["kind"] != "seats" \
            or p[1] >= p[2]:
        return None
    return (f"{p[0]}={p[2]:g} was seat-bound with KV room ({t['limiter']['evidence']}); "
            "fewer seats only hold less")


OOM_WORDS = ("out of memory", "outofmemory", "less than desired gpu memory utilization")
"""An engine's words for asking more memory than the GPU has free (CUDA's OOM; vLLM's
"Free memory on device ... is less than desired GPU memory utilization")."""
NO_KV_WORDS = ("no available memory for the cache blocks",
               "larger than the available kv cache memory")
"""vLLM's words for a memory share too small for its KV cache (after the weights, or for
one request of the full context)."""


def _failed_with(t: Trial, words: Iterable[str]) -> str | None:
    """The line of the failed trial's reason or log tail holding one of ``words``."""
    if t["status"] != "failed":
        return None
    for line in f"{t.get('reason') or ''}\n{t.get('log_tail') or ''}".splitlines()[::-1]:
        if any(w in line.lower() for w in words):
            return line.strip()
    return None


def _clip(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def memory_beyond(cand: dict[str, Any], t: Trial, more: bool) -> list[tuple[str, float, float]]:
    """The memory settings in which ``cand`` differs from the trial's, as (name, candidate's,
    trial's), when every one of them asks at least as much (``more``) or at most as much as
    the trial's and every other setting is equal; else []."""
    theirs = t["params"]
    if cand.keys() != theirs.keys():
        return []
    out = []
    for k, v in cand.items():
        if v == theirs[k]:
            continue
        a, b = _num(v), _num(theirs[k])
        if k not in MEMORY_PARAMS or a is None or b is None or (a < b if more else a > b):
            return []
        out.append((k, a, b))
    return out


def _settings(diff: list[tuple[str, float, float]], which: int) -> str:
    return ", ".join(f"{d[0]}={d[which]:g}" for d in diff)


def oom_with_less_memory(cand: dict[str, Any], t: Trial) -> str | None:
    """Failed to start out of memory: the same asking for as much or more memory in every
    memory setting fails too."""
    diff = memory_beyond(cand, t, more=True)
    if not diff or (line := _failed_with(t, OOM_WORDS)) is None:
        return None
    return (f"{_settings(diff, 2)} failed to start out of memory ({_clip(line)}); "
            f"{_settings(diff, 1)} asks for more")


def no_kv_memory_with_more(cand: dict[str, Any], t: Trial) -> str | None:
    """Failed to start with too little memory for its KV cache: as little or less memory in
    every memory setting fails too."""
    diff = memory_beyond(cand, t, more=False)
    if not diff or (line := _failed_with(t, NO_KV_WORDS)) is None:
        return None
    return (f"{_settings(diff, 2)} left too little memory for the KV cache ({_clip(line)}); "
            f"{_settings(diff, 1)} leaves less")


def kv_room_left(cand: dict[str, Any], t: Trial) -> str | None:
    """KV stayed below 60 % at every level: more memory for it would stay unused."""
    p = pair(cand, t, MEMORY_PARAMS)
    if p is None or t["status"] != "measured" or p[1] <= p[2]:
        return None
    kv = _peak(t, "kv_peak")
    if kv is None or kv >= KV_ROOM or t["limiter"]["kind"] not in ("seats", "compute"):
        return None
    return (f"with {p[0]}={p[2]:g} the KV cache never passed {100 * kv:.0f} % (up to "
            f"{load_text(t['limiter']['level'], is_rate(t))}); more memory for it would stay "
            "unused")


RULES: tuple[Rule, ...] = (kv_full_at_fewer_seats, seats_never_filled,
                           seat_bound_with_more_seats, oom_with_less_memory,
                           no_kv_memory_with_more, kv_room_left)


def skip_reason(cand: dict[str, Any], done: Iterable[Trial]) -> str | None:
    """The first rule's reason to skip ``cand`` given the trials done, or None."""
    for t in done:
        if t["status"] == "skipped":
            continue
        for rule in RULES:
            why = rule(cand, t)
            if why:
                return why
    return None
