"""Named scalar signals of one ``EngineRow``: what the rules read and the baseline keeps.

A signal is None when the engine does not report it (or the window holds no observation):
a rule that needs it then does not apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llmtop.model import EngineRow, Quantiles

__all__ = ["BASELINE_SIGNALS", "SIGNALS", "baseline_values", "count", "finished_total",
           "signal"]


def _q(attr: str, which: str) -> Callable[[EngineRow], float | None]:
    def get(row: EngineRow) -> float | None:
        q: Quantiles | None = getattr(row, attr)
        if q is None or not q.count > 0:
            return None
        v = getattr(q, which)
        return v if v is None or math.isfinite(v) else None

    return get


_QUANTILE_SIGNALS: dict[str, tuple[str, str]] = {
    "ttft_p50": ("ttft_s", "p50"),
    "ttft_p95": ("ttft_s", "p95"),
    "ttft_mean": ("ttft_s", "mean"),
    "queue_mean": ("queue_s", "mean"),
    "queue_p50": ("queue_s", "p50"),
    "queue_p95": ("queue_s", "p95"),
    "prefill_p50": ("prefill_s", "p50"),
    "prefill_p95": ("prefill_s", "p95"),
    "prefill_mean": ("prefill_s", "mean"),
    "itl_p50": ("itl_s", "p50"),
    "itl_p95": ("itl_s", "p95"),
    "itl_mean": ("itl_s", "mean"),
    "tpot_p50": ("tpot_s", "p50"),
    "tpot_p95": ("tpot_s", "p95"),
    "tpot_mean": ("tpot_s", "mean"),
    "prompt_p50": ("prompt_len", "p50"),
    "prompt_p90": ("prompt_len", "p90"),
    "iter_p50": ("iteration_tokens", "p50"),
    "inference_mean": ("inference_s", "mean"),
}
_ROW_SIGNALS: dict[str, str] = {
    "hit_rate": "prefix_hit_rate",
    "spec_accept": "spec_accept_rate",
    "running": "running",
    "waiting": "waiting",
    "kv": "kv_cache_usage",
    "req_s": "requests_per_s",
}


def _attr(name: str) -> Callable[[EngineRow], float | None]:
    def get(row: EngineRow) -> float | None:
        v: float | None = getattr(row, name)
        return v

    return get


SIGNALS: dict[str, Callable[[EngineRow], float | None]] = {
    **{k: _q(a, w) for k, (a, w) in _QUANTILE_SIGNALS.items()},
    **{k: _attr(a) for k, a in _ROW_SIGNALS.items()},
}
"""signal name -> getter."""

BASELINE_SIGNALS = tuple(SIGNALS)
"""The signals the baseline tracker keeps (all of them: a few floats per row)."""

_BY_FIELD: dict[str, list[tuple[int, str]]] = {}
for _i, _name in enumerate(BASELINE_SIGNALS):
    if _name in _QUANTILE_SIGNALS:
        _a, _w = _QUANTILE_SIGNALS[_name]
        _BY_FIELD.setdefault(_a, []).append((_i, _w))
_PLAIN = tuple((i, _ROW_SIGNALS[n]) for i, n in enumerate(BASELINE_SIGNALS) if n in _ROW_SIGNALS)


def baseline_values(row: EngineRow) -> list[float | None]:
    """``[signal(row, n) for n in BASELINE_SIGNALS]``, each quantile field read once (the
    baseline takes this of every row each step: hundreds of rows in fleet mode)."""
    out: list[float | None] = [None] * len(BASELINE_SIGNALS)
    isfinite = math.isfinite
    for attr, items in _BY_FIELD.items():
        q: Quantiles | None = getattr(row, attr)
        if q is None or not q.count > 0:
            continue
        for i, which in items:
            v = getattr(q, which)
            out[i] = v if v is None or isfinite(v) else None
    for i, attr in _PLAIN:
        out[i] = getattr(row, attr)
    return out


def signal(row: EngineRow, name: str) -> float | None:
    """The value of one named signal (None: not reported / no observation)."""
    return SIGNALS[name](row)


def count(row: EngineRow, attr: str) -> float:
    """Observations in the window of a quantile field (``ttft_s``, ``prompt_len``...); 0
    when the engine does not report it."""
    q: Quantiles | None = getattr(row, attr)
    return q.count if q is not None else 0.0


def finished_total(row: EngineRow) -> float | None:
    """Requests finished in the window, all reasons (None: not reported)."""
    if row.finished:
        return float(sum(row.finished.values()))
    return None
