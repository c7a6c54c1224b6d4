"""Build ``EngineRow`` objects from one target's kept samples. Pure: no I/O, no clock.

The store hands over the samples of one process (one restart epoch) inside the window; this
module turns them into rows with windowed rates/quantiles and lifetime values. It knows
nothing of ``target.TargetHistory`` (``target.target_rows`` calls down into it).

MBU and MFU are derived here, once, for direct and fleet mode alike (``fill_ratios``):

* achieved FLOP/s and bytes/s per GPU come from the engine's own counters
  (``derive.EST_RATE_KEYS``), None while it does not count them; ``mfu_hint`` then says how
  to turn them on (vLLM and SGLang only: the engines that have the flag)
* MBU = achieved read + write bytes/s / the peak bandwidth; MFU = achieved FLOP/s / the dense
  peak; the peak is ``--gpu-peak`` or the table's row for the GPU the engine's processes sit
  on (``gpu.peaks.engine_peak``); no peak -> None (an unknown GPU says so in ``mfu_hint``)
* a row with ranks (data parallel: one engine core and GPU set each) gets the mean of its
  ranks' per-GPU rates and ratios, not their sum
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmtop.config import GpuPeak
from llmtop.gpu.peaks import engine_peak
from llmtop.history.derive import (
    EST_RATE_KEYS,
    MFU_HINTS,
    TOKEN_HISTS,
    derive_lifetime,
    derive_window,
)
from llmtop.history.kv_rows import fill_kv_values
from llmtop.model import HIST_KEYS, EngineRow, EngineSample, GpuRecord, Hist, ModelSample

__all__ = ["ROW_HISTS", "Entry", "Lifetime", "build_model_row", "clean_gpu", "clean_sample",
           "fill_achieved", "fill_gauges", "fill_ratios", "series_value", "share_with"]

ROW_HISTS: dict[str, str] = {k: (k if k in TOKEN_HISTS else f"{k}_s") for k in HIST_KEYS}
"""Histogram key -> ``EngineRow`` field of its windowed quantiles (``ttft`` -> ``ttft_s``,
``prompt_len`` -> ``prompt_len``): a row works out only these (an engine's other histograms,
if any, are never summarized)."""


def fill_gauges(row: EngineRow, m: ModelSample) -> None:
    """The row's instantaneous fields from one sample's gauges (absent stays None) and info;
    direct mode (the newest sample) and fleet mode (the evaluation time) share it."""
    g = m.gauges
    row.running = g.get("running")
    row.waiting = g.get("waiting")
    row.waiting_deferred = g.get("waiting_deferred")
    row.max_running = g.get("max_running")
    row.kv_cache_usage = g.get("kv_usage")
    row.kv_capacity_tokens = g.get("kv_capacity_tokens")
    row.info = dict(m.info)


class Lifetime(Mapping[str, Any]):
    """``derive_lifetime`` of one sample, worked out on first read: a row is rebuilt every
    tick, its lifetime values are read only by the engine detail and JSON output."""

    __slots__ = ("_args", "_values")

    def __init__(self, sample: ModelSample, start_time: float | None, t_wall: float | None):
        self._args: tuple[ModelSample, float | None, float | None] | None = (
            sample, start_time, t_wall)
        self._values: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._values is None:
            assert self._args is not None
            m, start, t_wall = self._args
            self._values = derive_lifetime(m, start_time=start, t_wall=t_wall)
            self._args = None
        return self._values

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __eq__(self, other: object) -> bool:
        a, b = self._args, getattr(other, "_args", None)
        if a is not None and b is not None and a[0] is b[0] and a[1:] == b[1:]:
            return True  # the same sample at the same time: the same values, not worked out
        return isinstance(other, Mapping) and self._get() == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Lifetime({self._get()!r})"


@dataclass(slots=True)
class Entry:
    """One good sample of a target, as kept by the store."""

    t_mono: float
    t_wall: float
    sample: EngineSample
    epoch: int
    """Restart generation: samples of different epochs never share a window."""
    by_model: dict[str, ModelSample] = field(default_factory=dict)
    by_rank: dict[tuple[str, str], ModelSample] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_model = {m.model: m for m in self.sample.models}
        self.by_rank = {(r.model, r.rank or ""): r for r in self.sample.ranks}


def _finite(v: float | None) -> bool:
    return v is not None and not math.isnan(v) and not math.isinf(v)


def _all_finite(values: tuple[float, ...]) -> bool:
    try:
        return all(map(math.isfinite, values))
    except TypeError:  # a None among them
        return all(map(_finite, values))


def _clean_values(d: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in d.items() if _finite(v)}


def _clean_hists(d: dict[str, Hist]) -> dict[str, Hist]:
    hists: dict[str, Hist] = {}
    for k, h in d.items():
        if not _finite(h.count) or not _all_finite(h.cumulative):
            continue
        if not _finite(h.sum):  # buckets still give quantiles; only the mean is unknown
            h = Hist(h.bounds, h.cumulative, math.nan, h.count)
        hists[k] = h
    return hists


def _clean_model(m: ModelSample) -> ModelSample:
    return ModelSample(
        m.model, m.rank, _clean_values(m.gauges), _clean_values(m.counters),
        _clean_hists(m.hists), dict(m.info),
        gauges_by={k: c for k, v in m.gauges_by.items() if (c := _clean_values(v))},
        counters_by={k: c for k, v in m.counters_by.items() if (c := _clean_values(v))},
        hists_by={k: c for k, v in m.hists_by.items() if (c := _clean_hists(v))})


def clean_gpu(g: GpuRecord) -> GpuRecord:
    """NaN/Inf numbers of a GPU record become None (in place; returns it)."""
    for name in ("util", "mem_util", "power_w", "power_limit_w", "energy_j", "temp_c",
                 "temp_slowdown_c", "temp_shutdown_c", "mem_temp_c", "fan_pct",
                 "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "mem_clock_max_mhz",
                 "pcie_tx_bytes_s", "pcie_rx_bytes_s"):
        v = getattr(g, name)
        if isinstance(v, float) and not _finite(v):
            setattr(g, name, None)
    return g


def clean_sample(s: EngineSample) -> EngineSample:
    """A copy whose values are all finite: NaN/Inf gauges, counters and histograms are
    dropped (= not reported), never turned into 0."""
    return EngineSample(
        engine=s.engine,
        version=s.version,
        start_time=s.start_time if _finite(s.start_time) else None,
        models=[_clean_model(m) for m in s.models],
        ranks=[_clean_model(m) for m in s.ranks],
        gpus=[clean_gpu(g) for g in s.gpus],
        extra=s.extra,
    )


def _share_models(prev: list[ModelSample], cur: list[ModelSample]) -> None:
    before = {(m.model, m.rank): m for m in prev}
    for m in cur:
        p = before.get((m.model, m.rank))
        if p is None:
            continue
        if m.info == p.info:
            m.info = p.info
        _share_hists(p.hists, m.hists)
        for fam, hists in m.hists_by.items():
            _share_hists(p.hists_by.get(fam, {}), hists)


def _share_hists(prev: dict[str, Hist], hists: dict[str, Hist]) -> None:
    for k, h in hists.items():
        ph = prev.get(k)
        if ph is None:
            continue
        if h.bounds == ph.bounds:
            h.bounds = ph.bounds
        if h.cumulative == ph.cumulative:
            h.cumulative = ph.cumulative
            if h.bounds is ph.bounds and h.count == ph.count and h.sum == ph.sum:
                hists[k] = ph  # unchanged: the same object (``derive_window`` relies on it)


def share_with(prev: EngineSample | None, cur: EngineSample) -> EngineSample:
    """Make ``cur`` reuse ``prev``'s unchanged bucket bounds, bucket counts and info dicts,
    and a histogram that did not change at all is ``prev``'s very object (most of a scrape
    does not change from one second to the next): kept history then costs a fraction of the
    memory, and a window whose first and last histogram are one object saw no observation.
    Values are not changed."""
    if prev is not None:
        _share_models(prev.models, cur.models)
        _share_models(prev.ranks, cur.ranks)
    return cur


def build_model_row(
    row: EngineRow,
    window: Sequence[Entry],
    model: str,
    rank: str | None = None,
) -> EngineRow:
    """Fill ``row`` with the values of ``model`` (or one rank of it) over ``window``.

    ``window`` holds entries of one epoch, time-ordered; the newest one gives gauges and
    lifetime values.
    """
    if rank is None:
        pts = [(e.t_mono, e.by_model[model]) for e in window if model in e.by_model]
    else:
        pts = [(e.t_mono, e.by_rank[(model, rank)]) for e in window
               if (model, rank) in e.by_rank]
    if not pts:
        return row
    last = pts[-1][1]
    fill_gauges(row, last)
    w = derive_window(pts, ROW_HISTS)  # the row keeps only these quantiles
    row.prompt_tokens_per_s = w.rates.get("prompt_tokens_per_s")
    row.generation_tokens_per_s = w.rates.get("generation_tokens_per_s")
    row.requests_per_s = w.rates.get("requests_per_s")
    row.preemptions_per_s = w.rates.get("preemptions_per_s")
    row.errors_per_s = w.rates.get("errors_per_s")
    row.finished = w.finished
    row.prefix_hit_rate = w.prefix_hit_rate
    row.spec_accept_rate = w.spec_accept_rate
    q = w.quantiles
    for key, attr in ROW_HISTS.items():
        setattr(row, attr, q.get(key))
    newest = window[-1]
    row.lifetime = Lifetime(last, newest.sample.start_time, newest.t_wall)
    fill_kv_values(row, pts)
    fill_achieved(row, w.achieved, served=last.counters.get("generation_tokens"))
    return row


def fill_achieved(row: EngineRow, achieved: Mapping[str, float | None],
                  served: float | None = None) -> None:
    """The row's achieved FLOP/s and bytes/s per GPU (``derive.EST_RATE_KEYS`` fields; empty:
    the engine does not count them, and ``mfu_hint`` says how to turn them on).

    ``served``: tokens the engine generated since it started, when it says; at 0 its counters
    cannot tell "off" from "nothing to count yet", and the hint says both."""
    if not achieved:
        for name in EST_RATE_KEYS:
            setattr(row, name, None)
        row.achieved_bytes_per_s = None
        hint = MFU_HINTS.get(row.engine or "")
        if hint and served == 0:
            hint = f"none counted yet (nothing served since start); if they stay \u2013: {hint}"
        row.mfu_hint = hint
        return
    for name in EST_RATE_KEYS:
        setattr(row, name, achieved.get(name))
    r, w = row.achieved_read_bytes_per_s, row.achieved_write_bytes_per_s
    row.achieved_bytes_per_s = r + w if r is not None and w is not None else None
    row.mfu_hint = None


def _ratio(value: float | None, peak: float | None) -> float | None:
    return value / peak if value is not None and peak else None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known and len(known) == len(values) else None


def fill_ratios(rows: Sequence[EngineRow], gpus: Sequence[GpuRecord],
                override: GpuPeak | None = None) -> None:
    """MBU, MFU and ``gpu_peak`` of every row and rank (in place), after the rows are built:
    the peak from ``override`` or the table's row for the engine's GPUs; a row with ranks
    takes the mean of its ranks' achieved rates first."""
    for row in rows:
        if row.ranks and (row.achieved_bytes_per_s is not None
                          or row.achieved_flops_per_s is not None):
            for name in (*EST_RATE_KEYS, "achieved_bytes_per_s"):
                setattr(row, name, _mean([getattr(rr, name) for rr in row.ranks]))
        peak, note = engine_peak(row.target, gpus, override)
        for r in (row, *row.ranks):
            r.gpu_peak = _peak_json(peak)
            r.mbu = _ratio(r.achieved_bytes_per_s, peak.bytes_per_s if peak else None)
            r.mfu = _ratio(r.achieved_flops_per_s, peak.flops if peak else None)
            if note and r.mfu_hint is None and r.achieved_bytes_per_s is not None:
                r.mfu_hint = note


def _peak_json(peak: GpuPeak | None) -> dict[str, Any] | None:
    if peak is None:
        return None
    return {"gpu": peak.gpu, "bytes_per_s": peak.bytes_per_s, "flops": peak.flops,
            "source": peak.source}


def series_value(row: EngineRow, name: str) -> float | None:
    """One sparkline value of a row (``store.SERIES_FIELDS``)."""
    if name == "ttft_p50":
        return row.ttft_s.p50 if row.ttft_s is not None else None
    if name == "ttft_p95":
        return row.ttft_s.p95 if row.ttft_s is not None else None
    if name == "itl_p95":
        return row.itl_s.p95 if row.itl_s is not None else None
    return {
        "gen_tps": row.generation_tokens_per_s,
        "prompt_tps": row.prompt_tokens_per_s,
        "req_s": row.requests_per_s,
        "running": row.running,
        "waiting": row.waiting,
        "kv": row.kv_cache_usage,
        "preempt_s": row.preemptions_per_s,
    }.get(name)
