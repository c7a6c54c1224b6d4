"""Findings cite single requests.

- Where the engines' spans reached llmtop (``history.request_window``), ``queueing`` and
  ``long_prompts`` name the window's slowest requests as evidence and in their summary.
- The requests are passed in as data (``diagnose(..., requests=...)``: the monitor's store,
  ``--once``, replay); without any, findings are unchanged.
- Pure: every number said is computed here from the requests given; the ranking and median
  are ``history.request_rank``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from llmtop.diagnose.context import fmt_pct, fmt_s
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.thresholds import (
    CITE_MIN_REQUESTS,
    CITE_PROMPT_SLOWEST,
    CITE_QUEUE_SLOWEST,
)
from llmtop.history.request_rank import median, ranked, values
from llmtop.model import EngineRow
from llmtop.model.request_records import RequestRecord
from llmtop.units import count

__all__ = ["CITES", "cite", "prompt_citation", "queue_citation", "row_requests"]


def row_requests(row: EngineRow, requests: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests of one row: its target, and its model where the span names one."""
    return [r for r in requests if r.target == row.target
            and (r.model is None or row.model is None or r.model == row.model)]


def _slowest(reqs: Sequence[RequestRecord], n: int, need: str) -> list[RequestRecord]:
    """The ``n`` slowest by TTFT among those that have TTFT and ``need``."""
    return ranked([r for r in reqs if r.ttft_s is not None and getattr(r, need) is not None],
                  "ttft_s", n)


def _probe_words(slow: Sequence[RequestRecord]) -> str:
    k = sum(1 for r in slow if r.source == "probe")
    if not k:
        return ""
    return f" ({'all' if k == len(slow) else k} of the {len(slow)} are the probe's)"


def queue_citation(reqs: Sequence[RequestRecord], window: str
                   ) -> tuple[str, list[Evidence]] | None:
    """``the 10 slowest requests spent 88 % of their TTFT queued; longest cmpl-…, 7.9 s in
    queue`` and its evidence; None with fewer than ``CITE_MIN_REQUESTS`` queue times."""
    slow = _slowest(reqs, CITE_QUEUE_SLOWEST, "queue_s")
    if len(slow) < CITE_MIN_REQUESTS:
        return None
    ttft = sum(r.ttft_s or 0.0 for r in slow)
    if ttft <= 0:
        return None
    share = min(1.0, sum(r.queue_s or 0.0 for r in slow) / ttft)
    longest = max((r for r in reqs if r.queue_s is not None), key=lambda r: r.queue_s or 0.0)
    q = longest.queue_s or 0.0
    text = (f"the {len(slow)} slowest requests spent {fmt_pct(share)} of their TTFT queued"
            f"{_probe_words(slow)}; longest {longest.id}, {fmt_s(q)} in queue")
    ev = [Evidence("slowest_requests", float(len(slow)), window),
          Evidence("slowest_queue_share_of_ttft", share, window),
          Evidence("slowest_probe_requests", float(sum(r.source == "probe" for r in slow)),
                   window),
          Evidence("longest_queue_s", q, window),
          Evidence("longest_queue_request", longest.id, window)]
    return text, ev


def prompt_citation(reqs: Sequence[RequestRecord], window: str
                    ) -> tuple[str, list[Evidence]] | None:
    """``the 3 slowest had 61k–90k prompt tokens, the window's median 1.2k`` and its
    evidence; None with fewer than ``CITE_MIN_REQUESTS`` prompt lengths."""
    every = values(reqs, "prompt_tokens")
    slow = _slowest(reqs, CITE_PROMPT_SLOWEST, "prompt_tokens")
    mid = median(every)
    if len(every) < CITE_MIN_REQUESTS or not slow or mid is None:
        return None
    toks = [float(r.prompt_tokens or 0) for r in slow]
    lo, hi = min(toks), max(toks)
    span = count(lo) if count(lo) == count(hi) else f"{count(lo)}\u2013{count(hi)}"
    text = (f"the {len(slow)} slowest had {span} prompt tokens{_probe_words(slow)}, "
            f"the window's median {count(mid)}")
    ev = [Evidence("slowest_requests", float(len(slow)), window),
          Evidence("slowest_prompt_min", lo, window),
          Evidence("slowest_prompt_max", hi, window),
          Evidence("slowest_probe_requests", float(sum(r.source == "probe" for r in slow)),
                   window),
          Evidence("window_prompt_median", mid, window)]
    return text, ev


CITES: dict[str, Callable[[Sequence[RequestRecord], str],
                          tuple[str, list[Evidence]] | None]] = {
    "queueing": queue_citation,
    "long_prompts": prompt_citation,
}
"""Rule -> what it cites from the row's requests."""


def cite(f: Finding, reqs: Sequence[RequestRecord], window: str) -> Finding:
    """``f`` with its rule's citation (summary and evidence) where ``reqs`` allow one."""
    fn = CITES.get(f.rule)
    got = fn(reqs, window) if fn is not None and reqs else None
    if got is None:
        return f
    text, ev = got
    return replace(f, summary=f"{f.summary}; {text}", evidence=(*f.evidence, *ev))
