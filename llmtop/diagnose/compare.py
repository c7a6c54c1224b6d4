"""A latency signal against its usual value, robust to coarse histogram buckets.

Engines' buckets are coarse where the numbers live: vLLM's phase-time buckets
(``request_prefill_time_seconds``...) start at 0.3 s, so 10-80 ms prefills all sit in the
first bucket and every quantile is only that bound (``Quantiles.below``); SGLang's TTFT
buckets start at 0.1 s; vLLM's ITL buckets are 10/25/50 ms, so an interpolated p50 hides a
change inside one bucket. ``compare`` therefore judges the quantile and, where that shows no
rise (an upper bound only, or a change inside one bucket), the windowed mean
(Δsum/Δcount, exact whatever the buckets) against the baseline's mean, and says which one it
used in the evidence. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmtop.diagnose.context import RowCtx, fmt_s
from llmtop.diagnose.findings import Evidence
from llmtop.model import Quantiles

__all__ = ["Change", "compare"]

_FIELDS = {"ttft": ("ttft_s", "TTFT"), "prefill": ("prefill_s", "prefill"),
           "itl": ("itl_s", "ITL"), "tpot": ("tpot_s", "TPOT"), "queue": ("queue_s", "queue")}


@dataclass(frozen=True, slots=True)
class Change:
    """The outcome of ``compare``: the signal judged (``prefill_p95`` or ``prefill_mean``),
    its value and usual value, whether it rose past the limits, the evidence and a label
    for the summary (``prefill p95``, ``prefill mean``)."""

    signal: str
    value: float
    base: float
    up: bool
    evidence: tuple[Evidence, ...]
    label: str

    @property
    def words(self) -> str:
        """``prefill mean 62 ms vs 21 ms usual``."""
        return f"{self.label} {fmt_s(self.value)} vs {fmt_s(self.base)} usual"


def _bound_note(q: Quantiles | None, which: str) -> str:
    if q is not None and which in q.below:
        return f"{which} is only an upper bound (all in the lowest bucket): the mean is judged"
    if q is not None and which in q.above:
        return f"{which} is only a lower bound (in the +Inf bucket): the mean is judged"
    return f"{which} did not move (inside one bucket?): the mean is judged"


def compare(c: RowCtx, prefix: str, which: str, x: float, abs_step: float = 0.0
            ) -> Change | None:
    """Is ``<prefix>_<which>`` (e.g. prefill p95) at least ``x`` times its usual value and
    ``abs_step`` above it? Else, is the windowed mean (see the module doc)? None when neither
    has a usable value and baseline."""
    attr, label = _FIELDS[prefix]
    q: Quantiles | None = getattr(c.row, attr)
    qn, mn = f"{prefix}_{which}", f"{prefix}_mean"
    v, b = c.sig(qn), c.usual(qn)
    m, mb = c.sig(mn), c.usual(mn)
    q_ok = v is not None and b is not None and b > 0
    m_ok = m is not None and mb is not None and mb > 0
    below = q is not None and which in q.below
    bound = below or (q is not None and which in q.above)
    if q_ok and not below:  # a lower bound (+Inf bucket) that passes is a rise all the same
        assert v is not None and b is not None
        if v >= x * b and v - b >= abs_step:
            return Change(qn, v, b, True, (c.ev(qn, x * b),), f"{label} {which}")
    if m_ok:
        assert m is not None and mb is not None
        up = m >= x * mb and m - mb >= abs_step
        if up or bound or not q_ok:
            ev = (c.ev(mn, x * mb), c.ev(qn, _bound_note(q, which)))
            return Change(mn, m, mb, up, ev, f"{label} mean")
    if q_ok and not bound:
        assert v is not None and b is not None
        return Change(qn, v, b, False, (c.ev(qn, x * b),), f"{label} {which}")
    return None  # an upper bound without a mean to judge: cannot tell
