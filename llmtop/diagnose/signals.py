"""Named scalar signals of one ``EngineRow``: what the rules read and the baseline keeps.

A signal is None when the engine does not report it (or the window holds no observation):
a rule that needs it then does not apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from llmtop.model import EngineRow, Quantiles

__all__ = ["BASELINE_SIGNALS", "SIGNALS", "count", "finished_total", "signal"]


def _q(attr: str, which: str) -> Callable[[EngineRow], float | None]:
    def get(row: EngineRow) -> float | None:
        q: Quantiles | None = getattr(row, attr)
        if q is None or not q.count > 0:
            return None
        v = getattr(q, which)
        return v if v is None or math.isfinite(v) else None

    return get


SIGNALS: dict[str, Callable[[EngineRow], float | None]] = {
    "ttft_p50": _q("ttft_s", "p50"),
    "ttft_p95": _q("ttft_s", "p95"),
    "ttft_mean": _q("ttft_s", "mean"),
    "queue_mean": _q("queue_s", "mean"),
    "queue_p50": _q("queue_s", "p50"),
    "queue_p95": _q("queue_s", "p95"),
    "prefill_p50": _q("prefill_s", "p50"),
    "prefill_p95": _q("prefill_s", "p95"),
    "prefill_mean": _q("prefill_s", "mean"),
    "itl_p50": _q("itl_s", "p50"),
    "itl_p95": _q("itl_s", "p95"),
    "itl_mean": _q("itl_s", "mean"),
    "tpot_p50": _q("tpot_s", "p50"),
    "tpot_p95": _q("tpot_s", "p95"),
    "tpot_mean": _q("tpot_s", "mean"),
    "prompt_p50": _q("prompt_len", "p50"),
    "prompt_p90": _q("prompt_len", "p90"),
    "iter_p50": _q("iteration_tokens", "p50"),
    "hit_rate": lambda r: r.prefix_hit_rate,
    "spec_accept": lambda r: r.spec_accept_rate,
    "running": lambda r: r.running,
    "waiting": lambda r: r.waiting,
    "kv": lambda r: r.kv_cache_usage,
    "req_s": lambda r: r.requests_per_s,
}
"""signal name -> getter."""

BASELINE_SIGNALS = tuple(SIGNALS)
"""The signals the baseline tracker keeps (all of them: a few floats per row)."""


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
