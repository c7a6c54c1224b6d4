"""Derivation: counter rates, windowed histogram quantiles, restarts. Pure: no I/O, no clock.

Every function takes explicit timestamps (monotonic seconds) and never substitutes 0 for a
value that was not reported: ``None`` means "not reported" or "cannot be computed".

Rules (``METRICS.md`` §3):

* rate over a window = ``max(0, Δ) / Δt``; a decrease marks a restart: the series is clipped
  to the points after it, and with fewer than 2 points left the rate is ``None``.
* quantiles come from Δbuckets with Prometheus ``histogram_quantile`` interpolation, except
  that a quantile in the lowest bucket reports that bucket's upper bound (listed in
  ``Quantiles.below``) and one in the +Inf bucket the last finite bound (``Quantiles.above``).
  A bucket layout change counts as a restart for that histogram.
* a window with no observations gives ``Quantiles(count=0)`` with every value ``None``.
* lifetime values are the cumulative values of one sample (since process start).
* the engine's own FLOP/byte counters (``est_flops``, ``est_read_bytes``,
  ``est_write_bytes``) give achieved rates per GPU like any counter, but only while they
  count: absent, or still 0 since the process started (vLLM exports them at 0 without
  ``--enable-mfu-metrics``), they give None and ``MFU_HINTS`` says how to turn them on.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, pairwise, repeat
from operator import sub
from typing import Any

from llmtop.model import EngineSample, Hist, ModelSample, Quantiles
from llmtop.parse.sglang import MFU_ON_INFO

__all__ = [
    "EST_RATE_KEYS",
    "MFU_HINTS",
    "QUANTILES",
    "RATE_KEYS",
    "TOKEN_HISTS",
    "ModelWindow",
    "bucket_quantile",
    "counter_delta",
    "counter_rate",
    "derive_lifetime",
    "derive_window",
    "est_counting",
    "hist_delta",
    "hist_quantiles",
    "lifetime_quantiles",
    "prefix_hit_rate",
    "restart_reason",
    "spec_accept_rate",
    "window_start",
]

QUANTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p95", 0.95),
                                            ("p99", 0.99))
"""Quantile names and values reported in every ``Quantiles``."""

RATE_KEYS: dict[str, str] = {
    "prompt_tokens_per_s": "prompt_tokens",
    "generation_tokens_per_s": "generation_tokens",
    "requests_per_s": "requests",
    "preemptions_per_s": "preemptions",
}
"""Row field -> counter key, each a per-second rate over the window."""

EST_RATE_KEYS: dict[str, str] = {
    "achieved_flops_per_s": "est_flops",
    "achieved_read_bytes_per_s": "est_read_bytes",
    "achieved_write_bytes_per_s": "est_write_bytes",
}
"""Row field -> the engine's own FLOP/byte counter, a per-GPU rate over the window."""

MFU_HINTS: dict[str, str] = {
    "vllm": "start vLLM with --enable-mfu-metrics",
    "sglang": "start SGLang with --enable-metrics --enable-mfu-metrics",
}
"""Engine -> how to turn its FLOP/byte counters on (only engines that have the flag)."""

START_TIME_TOLERANCE_S = 1.0
"""A process start time that moves by more than this marks a restart."""

_EPS = 1e-9

Point = tuple[float, float]
"""``(t_mono, value)``."""


def _decreased(prev: float, cur: float) -> bool:
    # Hot loops test ``cur < prev and _decreased(prev, cur)``: the same answer, since a value
    # that did not go below ``prev`` is never below ``prev`` minus a tolerance.
    return cur < prev - _EPS * max(1.0, abs(prev))


def _last_restart(values: Sequence[float]) -> int:
    """Index of the last value below its predecessor (``_decreased``), else 0."""
    start = 0
    for i, (a, b) in enumerate(pairwise(values), 1):
        if b < a and _decreased(a, b):
            start = i
    return start


# --------------------------------------------------------------------------- windows


def window_start(times: Sequence[float], t_end: float, window_s: float) -> int:
    """Index of the first sample of the window ``[t_end - window_s, t_end]``.

    The base is the newest sample at or before the window start (so the window covers at
    least ``window_s`` when history allows), else the oldest sample. ``times`` ascending.
    """
    start = t_end - window_s + 1e-6
    idx = 0
    for i, t in enumerate(times):
        if t <= start:
            idx = i
        else:
            break
    return idx


# --------------------------------------------------------------------------- counters


def counter_delta(points: Sequence[Point]) -> tuple[float, float] | None:
    """``(Δvalue, Δt)`` over time-ordered points, clipped after the last decrease.

    None with fewer than 2 points after the last restart, or when Δt is not positive.
    """
    start = _last_restart([v for _, v in points])
    if len(points) - start < 2:
        return None
    (t0, v0), (t1, v1) = points[start], points[-1]
    dt = t1 - t0
    if dt <= 0:
        return None
    return max(0.0, v1 - v0), dt


def counter_rate(points: Sequence[Point]) -> float | None:
    """Per-second rate ``max(0, Δ)/Δt`` over the points, restart-aware; None if unknown."""
    d = counter_delta(points)
    return None if d is None else d[0] / d[1]


def _ratio(points: Sequence[tuple[float, float, float]]) -> float | None:
    """Δpart/Δwhole over ``(t, part, whole)`` points, clipped after a decrease of either
    counter and to 0..1; None with fewer than 2 points after it or when Δwhole <= 0."""
    start = max(_last_restart([p for _, p, _ in points]),
                _last_restart([w for _, _, w in points]))
    if len(points) - start < 2:
        return None
    dp = points[-1][1] - points[start][1]
    dw = points[-1][2] - points[start][2]
    if dw <= 0:
        return None
    return min(1.0, max(0.0, dp / dw))


def prefix_hit_rate(
    points: Sequence[tuple[float, float, float]], gauge: float | None = None
) -> float | None:
    """Windowed prefix-cache hit rate from ``(t, hits, queries)`` points.

    Δhits/Δqueries (clipped after a decrease of either counter); None when Δqueries == 0.
    ``gauge`` (the engine's own hit-rate gauge) is used only when there are no counters.
    """
    if not points:
        return gauge
    return _ratio(points)


def spec_accept_rate(
    points: Sequence[tuple[float, float, float]], gauge: float | None = None
) -> float | None:
    """Windowed speculative-decoding acceptance from ``(t, accepted, draft_tokens)`` points.

    Δaccepted/Δdraft tokens (clipped after a decrease of either counter); None when no draft
    token was proposed in the window (no drafts: nothing to accept, not 0 %). ``gauge`` (an
    engine-computed acceptance gauge) is used only when there are no counters.
    """
    if not points:
        return gauge
    return _ratio(points)


# --------------------------------------------------------------------------- histograms


def _monotonic(cum: Sequence[float]) -> list[float]:
    """Prometheus ``ensureMonotonic``: a cumulative count never goes down (NaN counts as
    the running max, as ``max(m, nan)`` does). No NaN in the result, so it is sorted."""
    run = accumulate(cum, max, initial=-math.inf)
    next(run)
    return list(run)


def bucket_quantile(
    q: float, bounds: Sequence[float], cumulative: Sequence[float]
) -> tuple[float | None, str | None]:
    """One quantile from cumulative buckets, as Prometheus ``histogram_quantile`` computes it.

    Returns ``(value, flag)``: flag ``"below"`` when the quantile falls in the lowest bucket
    (value = that bucket's upper bound, not interpolated), ``"above"`` when it falls in the
    +Inf bucket (value = the last finite bound), else None. ``(None, None)`` when there are
    no observations or the layout is unusable (fewer than 2 buckets, no +Inf bucket).
    """
    if len(bounds) < 2 or len(bounds) != len(cumulative) or not math.isinf(bounds[-1]):
        return None, None
    return _quantile(q, bounds, _monotonic(cumulative))


def _quantile(q: float, bounds: Sequence[float], cum: list[float]
              ) -> tuple[float | None, str | None]:
    """``bucket_quantile`` over counts already made monotonic (a usable layout)."""
    observations = cum[-1]
    if not observations > 0:
        return None, None
    rank = q * observations
    # sort.Search over all buckets but the last: first i with cum[i] >= rank (cum is sorted).
    b = bisect_left(cum, rank, 0, len(cum) - 1) if rank == rank else len(cum) - 1  # NaN: none
    if b == len(cum) - 1:
        return bounds[-2], "above"
    if b == 0:
        return bounds[0], "below"
    start, end = bounds[b - 1], bounds[b]
    count = cum[b] - cum[b - 1]
    rank -= cum[b - 1]
    if count <= 0:  # cannot happen after the search, kept for safety
        return end, None
    # never past the bucket's own bound: start + (end - start) * 1.0 can round one ulp above
    # end, above the next quantile's value interpolated from just above end
    return min(end, start + (end - start) * (rank / count)), None


def hist_quantiles(bounds: Sequence[float], cumulative: Sequence[float], total_sum: float,
                   count: float) -> Quantiles:
    """``Quantiles`` of one set of (already windowed or cumulative) bucket counts."""
    if not count > 0 and not (cumulative and cumulative[-1] > 0):
        return Quantiles(count=max(0.0, count))
    out = Quantiles(count=count,
                    mean=(total_sum / count) if count > 0 and math.isfinite(total_sum) else None)
    below: list[str] = []
    above: list[str] = []
    if bounds:
        usable = (len(bounds) >= 2 and len(bounds) == len(cumulative)
                  and math.isinf(bounds[-1]))
        cum = _monotonic(cumulative) if usable else []  # once for the four quantiles
        for name, q in QUANTILES:
            v, flag = _quantile(q, bounds, cum) if usable else (None, None)
            setattr(out, name, v)
            if flag == "below":
                below.append(name)
            elif flag == "above":
                above.append(name)
    out.below = tuple(below)
    out.above = tuple(above)
    return out


def hist_delta(points: Sequence[tuple[float, Hist]]) -> Hist | None:
    """The windowed histogram: last minus first, clipped after a restart of this histogram
    (a bucket layout change, or a decrease of the count or of the +Inf bucket). A single
    bucket going down alone is inconsistent data, not a restart: its delta is clipped at 0
    and ``bucket_quantile`` makes the counts monotonic, as Prometheus does.

    None with fewer than 2 points after the last restart.
    """
    return _hist_delta([h for _, h in points])


def _hist_delta(hists: list[Hist]) -> Hist | None:
    """``hist_delta`` of the histograms alone (their times do not matter)."""
    start = 0
    for i, (a, b) in enumerate(pairwise(hists), 1):
        ca, cb = a.cumulative, b.cumulative  # bounds are mostly shared (``rows.share_with``)
        if (
            (a.bounds is not b.bounds and a.bounds != b.bounds)
            or (b.count < a.count and _decreased(a.count, b.count))
            or (ca and cb and cb[-1] < ca[-1] and _decreased(ca[-1], cb[-1]))
        ):
            start = i
    if len(hists) - start < 2:
        return None
    return _delta(hists[start], hists[-1])


def _delta(first: Hist, last: Hist) -> Hist:
    """``last`` minus ``first`` (same layout), each bucket clipped at 0."""
    fc, lc = first.cumulative, last.cumulative
    if len(fc) == len(lc):
        cum = tuple(map(max, repeat(0.0), map(sub, lc, fc)))  # max(0.0, y - x) per bucket
    else:  # raises, as zip(strict=True) does
        cum = tuple(max(0.0, y - x) for x, y in zip(fc, lc, strict=True))
    d_sum = last.sum - first.sum  # NaN (an unreported sum) stays NaN: the mean is unknown
    return Hist(last.bounds, cum, d_sum if math.isnan(d_sum) else max(0.0, d_sum),
                max(0.0, last.count - first.count))


def lifetime_quantiles(h: Hist) -> Quantiles:
    """Quantiles of a cumulative histogram since process start (always labelled lifetime)."""
    return hist_quantiles(h.bounds, h.cumulative, h.sum, h.count)


# --------------------------------------------------------------------------- restarts


def restart_reason(prev: EngineSample, cur: EngineSample) -> str | None:
    """Why ``cur`` comes from a restarted process compared with ``prev``, or None.

    A changed start time, a changed process start mark (``extra["process_start_mark"]``:
    llama.cpp's start on the host's monotonic clock), or any counter / histogram count of a
    model going down.
    """
    if (
        prev.start_time is not None
        and cur.start_time is not None
        and abs(cur.start_time - prev.start_time) > START_TIME_TOLERANCE_S
    ):
        return "process start time changed"
    mark0, mark1 = prev.extra.get("process_start_mark"), cur.extra.get("process_start_mark")
    if mark0 is not None and mark1 is not None and mark0 != mark1:
        return "process start time changed"
    before = {m.model: m for m in prev.models}
    for m in cur.models:
        p = before.get(m.model)
        if p is None:
            continue
        why = _went_down(p.counters, m.counters, p.hists, m.hists)
        for fam, per in m.counters_by.items():
            why = why or _went_down(p.counters_by.get(fam, {}), per, {}, {}, f"{fam}:")
        for fam, hs in m.hists_by.items():
            why = why or _went_down({}, {}, p.hists_by.get(fam, {}), hs, f"{fam}:")
        if why is not None:
            return why
    return None


def _went_down(pc: dict[str, float], cc: dict[str, float], ph: dict[str, Hist],
               ch: dict[str, Hist], family: str = "") -> str | None:
    """The first counter or histogram count of ``cc``/``ch`` below its value in ``pc``/``ph``
    (``family``: the labelled family's name and colon, before the label)."""
    for k, v in cc.items():
        pv = pc.get(k)
        if pv is not None and v < pv and _decreased(pv, v):
            return f"counter {family}{k} went down"
    for k, h in ch.items():
        p = ph.get(k)
        if (p is not None and h.count < p.count and p.bounds == h.bounds
                and _decreased(p.count, h.count)):
            return f"histogram {family}{k} count went down"
    return None


# --------------------------------------------------------------------------- one model


@dataclass(slots=True)
class ModelWindow:
    """Windowed values of one model (or rank) over its samples in the window."""

    rates: dict[str, float | None] = field(default_factory=dict)
    """``RATE_KEYS`` fields plus ``errors_per_s``; None = not reported or not computable."""
    quantiles: dict[str, Quantiles | None] = field(default_factory=dict)
    """Histogram key -> windowed ``Quantiles`` (None = not reported or < 2 samples)."""
    prefix_hit_rate: float | None = None
    spec_accept_rate: float | None = None
    """Δaccepted/Δdraft tokens of speculative decoding (None: not reported, or no drafts)."""
    finished: dict[str, float] | None = None
    """Finished requests by reason counted over the window (None = not reported)."""
    achieved: dict[str, float | None] = field(default_factory=dict)
    """``EST_RATE_KEYS`` fields, only while the engine counts (``est_counting``); else
    empty."""


def _present(
    samples: Sequence[tuple[float, ModelSample]],
    vals: list[Any],
    zero: Callable[[Any], Any],
) -> list[tuple[float, Any]] | None:
    """Points of one value (``vals[i]`` is the value in ``samples[i]``, None = absent);
    None when the newest sample does not report it.

    A series that first appears after the window's first sample and is then always present
    was created lazily (prometheus_client labels, SGLang multiprocess files): it was 0 at
    the sample before, so that sample counts as ``zero(value)``. Samples in the window all
    come from one process, so this never bridges a restart.
    """
    if not vals or vals[-1] is None:
        return None
    pts = [(t, v) for (t, _), v in zip(samples, vals, strict=True) if v is not None]
    if len(pts) == len(vals):  # the common case: reported in every sample
        return pts
    first = next(i for i, v in enumerate(vals) if v is not None)
    if first > 0 and len(pts) == len(vals) - first:
        pts.insert(0, (samples[first - 1][0], zero(pts[0][1])))
    return pts


def _series(samples: Sequence[tuple[float, ModelSample]], key: str) -> list[Point] | None:
    """Points of counter ``key`` (see ``_present``); None when the newest lacks it."""
    return _present(samples, [m.counters.get(key) for _, m in samples], _zero_counter)


def _zero_counter(v: float) -> float:
    return 0.0


def _zero_hist(h: Hist) -> Hist:
    return Hist(h.bounds, tuple(0.0 for _ in h.cumulative), 0.0, 0.0)


def _pair(m: ModelSample, part: str, whole: str) -> tuple[float, float] | None:
    c = m.counters
    p, w = c.get(part), c.get(whole)
    return None if p is None or w is None else (p, w)


def _pair_points(samples: Sequence[tuple[float, ModelSample]], part: str, whole: str
                 ) -> list[tuple[float, float, float]]:
    """``(t, part, whole)`` points of two counters reported together (see ``_present``)."""
    pp = _present(samples, [_pair(m, part, whole) for _, m in samples], _zero_pair) or []
    return [(t, p, w) for t, (p, w) in pp]


def _zero_pair(v: tuple[float, float]) -> tuple[float, float]:
    return 0.0, 0.0


def _rate(samples: Sequence[tuple[float, ModelSample]], key: str) -> float | None:
    pts = _series(samples, key)
    return None if pts is None else counter_rate(pts)


def _finished_series(samples: Sequence[tuple[float, ModelSample]], reason: str
                     ) -> list[Point] | None:
    """Points of the finished-requests counter of ``reason`` (as ``_series``)."""
    return _present(samples, [m.counters_by.get("finished", {}).get(reason)
                              for _, m in samples], _zero_counter)


def _finished_rate(samples: Sequence[tuple[float, ModelSample]], reason: str) -> float | None:
    pts = _finished_series(samples, reason)
    return None if pts is None else counter_rate(pts)


def est_counting(m: ModelSample) -> bool:
    """True when the engine counts its FLOPs and bytes: a counter reported and above 0
    since the process started (0 all along is vLLM without ``--enable-mfu-metrics``), or the
    engine says it counts (SGLang's ``/server_info`` ``enable_mfu_metrics``, which
    ``parse.sglang`` keeps in ``info``: its series appear only on the first count)."""
    c = m.counters
    if m.info.get(MFU_ON_INFO) == "true" and any(k in c for k in EST_RATE_KEYS.values()):
        return True
    return any(c.get(k, 0.0) > 0 for k in EST_RATE_KEYS.values())


def derive_window(samples: Sequence[tuple[float, ModelSample]],
                  hist_keys: Collection[str] | None = None) -> ModelWindow:
    """Windowed rates, quantiles, prefix hit rate and finish reasons of one model.

    ``samples`` are ``(t_mono, ModelSample)`` of one model, time-ordered, already cut to the
    window and to the current process (the store clips at restarts it detects).
    ``hist_keys`` limits the quantiles to those histograms (None: every one).
    """
    out = ModelWindow()
    if not samples:
        return out
    last = samples[-1][1]
    for name, key in RATE_KEYS.items():
        out.rates[name] = _rate(samples, key)
    if est_counting(last):
        for name, key in EST_RATE_KEYS.items():
            out.achieved[name] = _rate(samples, key)
    reasons = list(last.counters_by.get("finished", {}))
    if out.rates["requests_per_s"] is None and "requests" not in last.counters and reasons:
        parts = [_finished_rate(samples, r) for r in reasons]
        known = [p for p in parts if p is not None]
        out.rates["requests_per_s"] = sum(known) if known else None
    if "errors" in last.counters:
        out.rates["errors_per_s"] = _rate(samples, "errors")
    elif "error" in reasons:
        out.rates["errors_per_s"] = _finished_rate(samples, "error")
    else:
        out.rates["errors_per_s"] = None
    if reasons:
        fin: dict[str, float] = {}
        for r in reasons:
            pts = _finished_series(samples, r)
            d = counter_delta(pts) if pts else None
            fin[r] = d[0] if d is not None else 0.0
        out.finished = fin if len(samples) >= 2 else None
    for key in last.hists:
        if hist_keys is not None and key not in hist_keys:
            continue
        vals = [m.hists.get(key) for _, m in samples]
        if all(vals):  # reported in every sample (a Hist is always true): no times needed
            if len(vals) >= 2 and vals[0] is vals[-1]:  # one object: unchanged all along
                out.quantiles[key] = Quantiles(count=0.0)  # (``rows.share_with``)
                continue
            d = _hist_delta(vals)
        else:
            hp = _present(samples, vals, _zero_hist)
            d = hist_delta(hp) if hp else None
        out.quantiles[key] = None if d is None else hist_quantiles(d.bounds, d.cumulative,
                                                                    d.sum, d.count)
    if "prefix_hits" in last.counters and "prefix_queries" in last.counters:
        out.prefix_hit_rate = prefix_hit_rate(
            _pair_points(samples, "prefix_hits", "prefix_queries"))
    else:
        out.prefix_hit_rate = last.gauges.get("prefix_hit_rate_gauge")
    if "spec_accepted_tokens" in last.counters and "spec_draft_tokens" in last.counters:
        out.spec_accept_rate = spec_accept_rate(
            _pair_points(samples, "spec_accepted_tokens", "spec_draft_tokens"))
    else:
        out.spec_accept_rate = last.gauges.get("spec_accept_rate_gauge")
    return out


LIFETIME_COUNTERS = ("requests", "prompt_tokens", "generation_tokens", "preemptions", "errors",
                     "aborted", "rejected", "spec_drafts", "spec_draft_tokens",
                     "spec_accepted_tokens")
TOKEN_HISTS = frozenset({"prompt_len", "gen_len", "iteration_tokens"})
"""Histograms in tokens: their row and lifetime keys carry no ``_s``."""


def _lifetime_ratio(m: ModelSample, part: str, whole: str, gauge: str) -> float | None:
    p, w = m.counters.get(part), m.counters.get(whole)
    if p is None or w is None:
        return m.gauges.get(gauge)
    return min(1.0, max(0.0, p / w)) if w > 0 else None


def derive_lifetime(m: ModelSample, *, start_time: float | None = None,
                    t_wall: float | None = None) -> dict[str, object]:
    """Values since process start, from the cumulative values of one sample.

    Keys: ``<hist>_s`` (latency and phase ``Quantiles``), ``prompt_len``/``gen_len``/
    ``iteration_tokens`` (token ``Quantiles``), ``prefix_hit_rate``, ``spec_accept_rate``, the
    counters of ``LIFETIME_COUNTERS`` that are reported, ``finished`` ({reason: count}),
    ``start_time`` and ``uptime_s``.
    """
    out: dict[str, object] = {}
    for key, h in m.hists.items():
        name = key if key in TOKEN_HISTS else f"{key}_s"
        out[name] = lifetime_quantiles(h)
    for fam, hists in m.hists_by.items():  # (``kv_stage:bootstrap_s``)
        for label, h in hists.items():
            out[f"{fam}:{label}_s"] = lifetime_quantiles(h)
    out["prefix_hit_rate"] = _lifetime_ratio(m, "prefix_hits", "prefix_queries",
                                             "prefix_hit_rate_gauge")
    out["spec_accept_rate"] = _lifetime_ratio(m, "spec_accepted_tokens", "spec_draft_tokens",
                                              "spec_accept_rate_gauge")
    for k in LIFETIME_COUNTERS:
        if k in m.counters:
            out[k] = m.counters[k]
    fin = m.counters_by.get("finished")
    if fin:
        out["finished"] = dict(fin)
    out["start_time"] = start_time
    # a start time ahead of our clock (skew on a remote host) gives no uptime, not 0
    out["uptime_s"] = (
        t_wall - start_time
        if start_time is not None and t_wall is not None and t_wall >= start_time
        else None
    )
    return out
