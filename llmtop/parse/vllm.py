"""vLLM ``/metrics`` -> ``EngineSample``, for every name generation from V0 to 0.33.

Aliases (``docs/metrics.md`` "vLLM"; ``vllm/v1/metrics/loggers.py`` and its older releases),
first present wins:

* kv_usage: ``kv_cache_usage_perc`` | ``gpu_cache_usage_perc`` (<= 0.11)
* prefix_queries/prefix_hits: ``prefix_cache_*`` (tokens) | ``gpu_prefix_cache_*`` (V1 0.7-0.11;
  blocks in 0.7); V0's gauge ``gpu_prefix_cache_hit_rate`` -> ``prefix_hit_rate_gauge``
* itl: ``inter_token_latency_seconds`` | ``time_per_output_token_seconds`` (<= 0.11, same buckets)
* tpot: ``request_time_per_output_token_seconds`` (>= 0.11)
* swapped: ``num_requests_swapped`` (V0), kept apart from ``waiting``
* kv_capacity_tokens: ``cache_config_info`` label ``kv_cache_size_tokens``, else
  ``num_gpu_blocks * block_size``; its other labels go to ``ModelSample.info``
* ``request_success_total{finished_reason}`` -> ``finished`` by reason, ``requests`` (sum),
  ``aborted`` (``abort``), ``errors`` (``error``); ``admission_rejections_total`` -> ``rejected``
* phases: ``request_{prefill,decode,inference}_time_seconds`` -> ``prefill``/``decode``/
  ``inference``; lengths ``request_prompt_tokens``/``request_generation_tokens`` ->
  ``prompt_len``/``gen_len``; ``iteration_tokens_total`` (a histogram whose family name ends in
  ``_total``) -> ``iteration_tokens``
* spec decode (V1, and V0's counters): ``spec_decode_num_drafts``/``_num_draft_tokens``/
  ``_num_accepted_tokens`` -> ``spec_drafts``/``spec_draft_tokens``/``spec_accepted_tokens``;
  V0's gauge ``spec_decode_draft_acceptance_rate`` -> ``spec_accept_rate_gauge``
* the engine's own FLOP/byte count (0.32+, ``vllm/v1/metrics/perf.py``):
  ``estimated_flops_per_gpu_total``/``_read_bytes_``/``_write_bytes_`` -> ``est_flops``/
  ``est_read_bytes``/``est_write_bytes``; exported at 0 without ``--enable-mfu-metrics``
  (a real 0.32 server), so 0 is kept here and ``history`` tells "off" from "idle"

Labels: the model is ``model_name`` (Triton's vLLM backend: ``model``); data-parallel ranks are
``engine``. ``models`` holds one aggregate per model; ``ranks`` the per-rank samples when the
scrape has more than one ``engine`` value. NaN and infinite gauge/counter values are treated as
not reported. ``*_created`` samples are never values; the earliest one is the start time when
``process_start_time_seconds`` is absent (multi-API-server mode).

The grouping helpers ``group_values``/``group_hists`` are shared by the SGLang and LMDeploy
adapters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from functools import reduce
from operator import add, attrgetter, itemgetter
from typing import Any

from llmtop.model import EngineSample, Hist, ModelSample
from llmtop.parse.common import add_value, assemble, parse_engine_text, put_value
from llmtop.parse.dynamo_worker import ROLE_FAMILIES, set_role
from llmtop.parse.exposition import Family
from llmtop.parse.kv_offload import OFFLOAD_FAMILIES, read_offload
from llmtop.parse.kv_series import VLLM_FAMILIES, read_vllm

__all__ = ["HIST_FAMILIES", "WANTED", "group_hists", "group_values", "hist_key", "normalize",
           "normalize_families", "want"]

_P = "vllm:"
_GAUGES = {  # family -> gauge key; earlier aliases win
    "num_requests_running": "running",
    "num_requests_waiting": "waiting",
    "num_requests_swapped": "swapped",
    "gpu_prefix_cache_hit_rate": "prefix_hit_rate_gauge",
    "spec_decode_draft_acceptance_rate": "spec_accept_rate_gauge",
}
_KV_USAGE = ("kv_cache_usage_perc", "gpu_cache_usage_perc")
_WAITING_BY_REASON = "num_requests_waiting_by_reason"
"""v0.13+: ``reason`` ``capacity`` (no room to schedule) or ``deferred`` (LoRA budget, KV
transfer, blocked); the reasons sum to ``num_requests_waiting``."""
_PREFIX = (("prefix_cache_queries", "prefix_cache_hits"),
           ("gpu_prefix_cache_queries", "gpu_prefix_cache_hits"))  # fmt: skip
_COUNTERS = {
    "prompt_tokens": "prompt_tokens",
    "generation_tokens": "generation_tokens",
    "num_preemptions": "preemptions",
    "spec_decode_num_drafts": "spec_drafts",
    "spec_decode_num_draft_tokens": "spec_draft_tokens",
    "spec_decode_num_accepted_tokens": "spec_accepted_tokens",
    "estimated_flops_per_gpu": "est_flops",
    "estimated_read_bytes_per_gpu": "est_read_bytes",
    "estimated_write_bytes_per_gpu": "est_write_bytes",
}
_HISTS: dict[str, tuple[str, ...]] = {
    "ttft": ("time_to_first_token_seconds",),
    "itl": ("inter_token_latency_seconds", "time_per_output_token_seconds"),
    "tpot": ("request_time_per_output_token_seconds",),
    "e2e": ("e2e_request_latency_seconds",),
    "queue": ("request_queue_time_seconds",),
    "prefill": ("request_prefill_time_seconds",),
    "decode": ("request_decode_time_seconds",),
    "inference": ("request_inference_time_seconds",),
    "prompt_len": ("request_prompt_tokens",),
    "gen_len": ("request_generation_tokens",),
    "iteration_tokens": ("iteration_tokens_total",),  # a histogram family named ..._total
}
_COUNTER_FAMILIES = (
    *_COUNTERS,
    "prefix_cache_queries",
    "prefix_cache_hits",
    "gpu_prefix_cache_queries",
    "gpu_prefix_cache_hits",
    "request_success",
    "admission_rejections",
)
WANTED = frozenset(
    [_P + n for n in (*_GAUGES, *_KV_USAGE, *_COUNTER_FAMILIES, "cache_config_info",
                      _WAITING_BY_REASON)]
    + [_P + n for names in _HISTS.values() for n in names]
    + [_P + n + "_created" for n in _COUNTER_FAMILIES]
    + ["process_start_time_seconds"]
) | VLLM_FAMILIES | OFFLOAD_FAMILIES | ROLE_FAMILIES
"""Family names this adapter reads (what ``parse(want=...)`` keeps)."""

want = WANTED.__contains__

HIST_FAMILIES: dict[str, tuple[str, ...]] = {
    k: tuple(_P + n for n in names) for k, names in _HISTS.items()}
"""Histogram key -> its family names, earliest alias first (the first present is read):
fleet mode queries these buckets only and builds the ``Hist`` with ``hist_key``."""

Key = tuple[str, str | None]
KeyFn = Callable[[dict[str, str]], "Key | None"]


def _finite(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def group_values(
    fam: Family | None, key: KeyFn, *, suffix: str = "_total", agg: str = "sum"
) -> dict[Key, float]:
    """Sum (``agg="max"``: max) the finite samples named ``fam.name + suffix`` (or exactly
    ``fam.name``) by ``key``.

    ``key(labels)`` returns the group, or None to drop the sample. Returns {} for no family.
    """
    out: dict[Key, float] = {}
    if fam is None:
        return out
    names = (fam.name, fam.name + suffix) if suffix else (fam.name,)
    for s in fam.samples:
        if s.name not in names or not _finite(s.value):
            continue
        k = key(s.labels)
        if k is None:
            continue
        if agg == "max":
            out[k] = max(out.get(k, s.value), s.value)
        else:
            out[k] = out.get(k, 0.0) + s.value
    return out


_Route = tuple[dict[str, str], KeyFn, Key | None, float | None]
_ROUTES: dict[int, _Route] = {}
"""``id(labels)`` -> (labels, key, ``key(labels)``, bucket bound or None): what
``group_hists`` makes of a series, kept across scrapes. The parser shares one labels dict per
series (``exposition._SERIES``) and never mutates it; holding the dict keeps its id from
being reused. Cleared when it reaches ``_ROUTES_MAX`` (it may hold that many dicts the parser
has dropped)."""
_ROUTES_MAX = 20_000


def _route(labels: dict[str, str], key: KeyFn) -> _Route:
    """Group and bucket bound (None when missing, not a number or NaN) of one series, kept
    in ``_ROUTES``."""
    r = _ROUTES.get(id(labels))
    if r is not None and r[0] is labels and r[1] is key:
        return r
    try:
        le: float | None = float(labels.get("le", "nan"))
    except ValueError:
        le = None
    if le is not None and math.isnan(le):
        le = None
    if len(_ROUTES) >= _ROUTES_MAX:
        _ROUTES.clear()
    r = _ROUTES[id(labels)] = (labels, key, key(labels), le)
    return r


def group_hists(fam: Family | None, key: KeyFn, *, scale: float = 1.0) -> dict[Key, Hist]:
    """One cumulative ``Hist`` per ``key`` group of a histogram family (series summed).

    ``key`` must depend on the labels only: its result is kept per labels dict. When the
    family has the same series as last time (the steady state), the values are put where
    the layout kept from then says (``_Layout``) instead of grouping every sample again."""
    if fam is None:
        return {}
    samples = fam.samples
    lkey = (fam.name, key, scale)
    names = tuple(map(_NAME, samples))
    labels = tuple(map(_LABELS, samples))
    lay = _LAYOUTS.get(lkey)
    if lay is None or lay.names != names or lay.labels != labels:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        lay = _LAYOUTS[lkey] = _Layout.of(fam.name, key, scale, names, labels)
    values = list(map(_VALUE, samples))
    if any(map(math.isnan, values)):  # NaN buckets and counts are left out: the slow path
        return _group_hists(fam, key, scale)
    return lay.place(values)


_NAME = attrgetter("name")
_LABELS = attrgetter("labels")
_VALUE = attrgetter("value")
_LayoutGroup = tuple[Key, tuple[tuple[int, ...], ...], tuple[float, ...], tuple[int, ...],
                     tuple[int, ...]]


class _Layout:
    """Where each group's buckets, sums and counts sit among a family's samples (``groups``:
    key, the sample indices of each bucket by bound, scaled bounds, the sum's and the
    count's indices), kept per (family, key, scale) with the sample names and labels dicts
    it was made from. Samples of one place are added in sample order, as ``_group_hists``
    adds them, so both give the same floats."""

    __slots__ = ("groups", "labels", "names", "scale", "single")

    def __init__(self, names: tuple[str, ...], labels: tuple[dict[str, str], ...],
                 scale: float, groups: list[_LayoutGroup]) -> None:
        self.names, self.labels, self.scale, self.groups = names, labels, scale, groups
        self.single = all(len(ix) == 1 for g in groups for ix in g[1])
        """No bucket adds up samples (one series per group): a bucket is one lookup."""

    @classmethod
    def of(cls, base: str, key: KeyFn, scale: float, names: tuple[str, ...],
           labels: tuple[dict[str, str], ...]) -> _Layout:
        bname, sname, cname = base + "_bucket", base + "_sum", base + "_count"
        buckets: dict[Key, dict[float, list[int]]] = {}
        sums: dict[Key, list[int]] = {}
        counts: dict[Key, list[int]] = {}
        for i, (n, lab) in enumerate(zip(names, labels, strict=True)):
            if n != bname and n != sname and n != cname:
                continue
            r = _route(lab, key)
            k = r[2]
            if k is None:
                continue
            if n == bname:
                if r[3] is not None:
                    buckets.setdefault(k, {}).setdefault(r[3], []).append(i)
            else:
                (sums if n == sname else counts).setdefault(k, []).append(i)
        groups: list[_LayoutGroup] = []
        for k in buckets.keys() | counts.keys():
            b = buckets.get(k, {})
            bounds = tuple(sorted(b))
            if scale != 1.0:
                bounds_out = tuple(x if math.isinf(x) else x * scale for x in bounds)
            else:
                bounds_out = bounds
            groups.append((k, tuple(tuple(b[x]) for x in bounds), bounds_out,
                           tuple(sums.get(k, ())), tuple(counts.get(k, ()))))
        return cls(names, labels, scale, groups)

    def place(self, values: list[float]) -> dict[Key, Hist]:
        """The Hists of a family with these samples and ``values`` (no NaN among them)."""
        out: dict[Key, Hist] = {}
        at, scale = values.__getitem__, self.scale
        for k, idx, bounds, si, ci in self.groups:
            if self.single:
                cum = tuple(map(at, map(itemgetter(0), idx)))
            else:
                cum = tuple(reduce(add, map(at, ix), 0.0) for ix in idx)
            out[k] = Hist(
                bounds=bounds,
                cumulative=cum,
                sum=(reduce(add, map(at, si), 0.0) if si else math.nan) * scale,
                count=reduce(add, map(at, ci), 0.0) if ci else (cum[-1] if cum else 0.0),
            )
        return out


_LAYOUTS: dict[tuple[str, KeyFn, float], _Layout] = {}
"""(family, key function, scale) -> its ``_Layout`` at the last call."""
_LAYOUTS_MAX = 256


def _group_hists(fam: Family, key: KeyFn, scale: float) -> dict[Key, Hist]:
    """``group_hists`` sample by sample."""
    base = fam.name
    bname, sname, cname = base + "_bucket", base + "_sum", base + "_count"
    buckets: dict[Key, dict[float, float]] = {}
    sums: dict[Key, float] = {}
    counts: dict[Key, float] = {}
    isnan = math.isnan
    for s in fam.samples:
        n = s.name
        if n not in (bname, sname, cname):
            continue
        r = _route(s.labels, key)
        k = r[2]
        if k is None:
            continue
        if n == bname:
            le = r[3]
            if le is None or isnan(s.value):
                continue
            b = buckets.get(k)
            if b is None:
                b = buckets[k] = {}
            b[le] = b.get(le, 0.0) + s.value
        elif n == sname:
            sums[k] = sums.get(k, 0.0) + s.value  # a NaN sum stays NaN: its mean is unknown
        elif not isnan(s.value):
            counts[k] = counts.get(k, 0.0) + s.value
    out: dict[Key, Hist] = {}
    for k in buckets.keys() | counts.keys():
        b = buckets.get(k, {})
        bounds = tuple(sorted(b))
        cum = tuple(map(b.__getitem__, bounds))
        out[k] = Hist(
            bounds=bounds if scale == 1.0 else tuple(x if math.isinf(x) else x * scale
                                                     for x in bounds),
            cumulative=cum,
            sum=sums.get(k, math.nan) * scale,
            count=counts.get(k, cum[-1] if cum else 0.0),
        )
    return out


def _num(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if _finite(v) else None


_KEY_FNS: dict[tuple[tuple[str, ...], str], KeyFn] = {}


def _key_fn(model_labels: tuple[str, ...], rank_label: str) -> KeyFn:
    """The (model, rank) key function, one per label choice (``group_hists`` keeps its
    results per function)."""
    fn = _KEY_FNS.get((model_labels, rank_label))
    if fn is None:

        def fn(labels: dict[str, str]) -> Key | None:
            for ml in model_labels:
                m = labels.get(ml)
                if m is not None:
                    return m, labels.get(rank_label)
            return None

        if len(_KEY_FNS) >= 64:
            _KEY_FNS.clear()
        _KEY_FNS[(model_labels, rank_label)] = fn
    return fn


hist_key: KeyFn = _key_fn(("model_name", "model"), "engine")
"""The (model, rank) of a series, as ``normalize_families`` groups it by default."""


def _first(families: dict[str, Family], names: Iterable[str]) -> Family | None:
    for n in names:
        fam = families.get(_P + n)
        if fam is not None and fam.samples:
            return fam
    return None


def normalize_families(
    families: dict[str, Family],
    *,
    model_labels: tuple[str, ...] = ("model_name", "model"),
    rank_label: str = "engine",
) -> EngineSample:
    """Normalize parsed ``vllm:*`` families (also used by the Triton vLLM-backend adapter)."""
    parts: dict[Key, ModelSample] = {}
    key = _key_fn(model_labels, rank_label)

    def part(k: Key) -> ModelSample:
        p = parts.get(k)
        if p is None:
            p = parts[k] = ModelSample(model=k[0], rank=k[1])
        return p

    def put(kind: str, name: str, vals: dict[Key, Any], label: str | None = None) -> None:
        for k, v in vals.items():
            put_value(part(k), kind, name, v, label)

    for fam_name, gkey in _GAUGES.items():
        put("gauges", gkey, group_values(families.get(_P + fam_name), key, suffix=""))
    put("gauges", "kv_usage", group_values(_first(families, _KV_USAGE), key, suffix=""))
    by_reason = families.get(_P + _WAITING_BY_REASON)
    if by_reason is not None and by_reason.samples:  # 0 deferred is a reading: keep it
        put("gauges", "waiting_deferred", {k: 0.0 for k in group_values(by_reason, key,
                                                                         suffix="")})
        put("gauges", "waiting_deferred", group_values(
            by_reason, lambda lb: key(lb) if lb.get("reason") == "deferred" else None,
            suffix=""))
    for fam_name, ckey in _COUNTERS.items():
        put("counters", ckey, group_values(families.get(_P + fam_name), key))
    for qname, hname in _PREFIX:
        q, h = families.get(_P + qname), families.get(_P + hname)
        if q is not None and q.samples:
            put("counters", "prefix_queries", group_values(q, key))
            put("counters", "prefix_hits", group_values(h, key))
            break
    _finished(families.get(_P + "request_success"), key, part)
    put("counters", "rejected", group_values(families.get(_P + "admission_rejections"), key))
    for hkey, names in _HISTS.items():
        put("hists", hkey, group_hists(_first(families, names), key))
    _cache_config(families.get(_P + "cache_config_info"), parts, rank_label)
    read_vllm(families, key, put, group_values, group_hists, list(parts))
    read_offload(families, key, put, group_values)
    set_role(families, parts)  # a Dynamo worker passing vLLM's series through

    sample = assemble("vllm", parts)
    sample.start_time = _start_time(families)
    return sample


def _finished(fam: Family | None, key: KeyFn, part: Callable[[Key], ModelSample]) -> None:
    if fam is None:
        return
    for s in fam.samples:
        if s.name not in (fam.name, fam.name + "_total") or not _finite(s.value):
            continue
        k = key(s.labels)
        if k is None:
            continue
        m = part(k)
        c = m.counters
        reason = s.labels.get("finished_reason", "unknown")
        add_value(m, "counters", "finished", s.value, reason)
        c["requests"] = c.get("requests", 0.0) + s.value
        if reason == "abort":
            c["aborted"] = c.get("aborted", 0.0) + s.value
        elif reason == "error":
            c["errors"] = c.get("errors", 0.0) + s.value


def _cache_config(fam: Family | None, parts: dict[Key, ModelSample], rank_label: str) -> None:
    """Apply ``cache_config_info`` (no model label) to the parts of the same rank."""
    if fam is None:
        return
    for s in fam.samples:
        if s.name != fam.name:
            continue
        labels = s.labels
        rank = labels.get(rank_label)
        cap = _num(labels.get("kv_cache_size_tokens"))
        if cap is None:
            blocks, size = _num(labels.get("num_gpu_blocks")), _num(labels.get("block_size"))
            if blocks is not None and size is not None:
                cap = blocks * size
        info = {k: v for k, v in labels.items() if k != rank_label}
        targets = [p for k, p in parts.items() if rank is None or k[1] == rank]
        if not targets:  # e.g. an ``engine`` label here but none on the other series
            targets = [p for k, p in parts.items() if k[1] is None]
        for p in targets:
            if cap is not None:
                p.gauges["kv_capacity_tokens"] = cap
            for k, v in info.items():
                p.info.setdefault(k, v)


def _start_time(families: dict[str, Family]) -> float | None:
    fam = families.get("process_start_time_seconds")
    if fam is not None:
        for s in fam.samples:
            if _finite(s.value) and s.value > 0:
                return s.value
    best: float | None = None
    for n in _COUNTER_FAMILIES:
        fam = families.get(_P + n + "_created")
        if fam is None:
            continue
        for s in fam.samples:
            if _finite(s.value) and s.value > 0 and (best is None or s.value < best):
                best = s.value
    return best


def _version(identity: dict[str, Any] | None) -> str | None:
    if isinstance(identity, dict):
        v = identity.get("version")
        if isinstance(v, str) and v:
            return v
    return None


def normalize(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    identity: dict[str, Any] | None = None,
) -> EngineSample:
    """Parse and normalize one vLLM scrape. Raises ``ParseError`` on a bad payload."""
    families = parse_engine_text(body, "vllm:", want,
                                 "not vLLM, or started with --disable-log-stats")
    sample = normalize_families(families)
    sample.version = _version(identity)
    return sample
