"""Helpers shared by the engine adapters: label grouping, histograms, rank aggregation.

Pure functions over ``exposition.Family``/``Sample``; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from llmtop.model import LABELLED, EngineSample, Hist, ModelSample
from llmtop.parse.exposition import Family, ParseError, Sample, parse

__all__ = [
    "add_value",
    "aggregate",
    "assemble",
    "build_hists",
    "first_value",
    "hist_family",
    "identity_host",
    "identity_model",
    "identity_version",
    "is_finite",
    "label_key",
    "outcome_counters",
    "parse_engine_text",
    "put_value",
    "sample_index",
    "series_values",
]


def is_finite(v: float) -> bool:
    """True for a real number (not NaN, not +/-Inf)."""
    return not (math.isnan(v) or math.isinf(v))


def label_key(labels: dict[str, str], keys: Iterable[str]) -> tuple[str, ...]:
    """The values of ``keys`` in ``labels`` ('' when absent), as a grouping key."""
    return tuple(labels.get(k, "") for k in keys)


def series_values(
    fam: Family | None,
    group: Iterable[str],
    *,
    suffix: str = "",
    where: dict[str, str] | None = None,
) -> dict[tuple[str, ...], float]:
    """Sum the samples named ``fam.name + suffix`` by the ``group`` labels.

    NaN samples are skipped (a NaN gauge means "no value", not zero). ``where`` keeps only
    samples whose labels match. Returns {} when the family is absent.
    """
    if fam is None:
        return {}
    group = tuple(group)
    want = fam.name + suffix
    out: dict[tuple[str, ...], float] = {}
    for s in fam.samples:
        if s.name != want or math.isnan(s.value):
            continue
        if where and any(s.labels.get(k) != v for k, v in where.items()):
            continue
        key = label_key(s.labels, group)
        out[key] = out.get(key, 0.0) + s.value
    return out


def first_value(fam: Family | None, suffix: str = "") -> float | None:
    """The first non-NaN sample value of a family (unlabelled gauges), or None."""
    if fam is None:
        return None
    want = fam.name + suffix
    for s in fam.samples:
        if s.name == want and not math.isnan(s.value):
            return s.value
    return None


def build_hists(
    fam: Family | None,
    group: Iterable[str],
    *,
    scale: float = 1.0,
    where: dict[str, str] | None = None,
) -> dict[tuple[str, ...], Hist]:
    """Build one cumulative ``Hist`` per ``group`` label key from a histogram family.

    Series that differ only in labels outside ``group`` (e.g. ``pid``, ``is_streaming``) are
    summed bucket by bucket. ``scale`` converts bounds and sums to base units (ms -> s: 1e-3).
    """
    if fam is None:
        return {}
    group = tuple(group)
    base = fam.name
    buckets: dict[tuple[str, ...], dict[float, float]] = {}
    sums: dict[tuple[str, ...], float] = {}
    counts: dict[tuple[str, ...], float] = {}
    for s in fam.samples:
        if where and any(s.labels.get(k) != v for k, v in where.items()):
            continue
        key = label_key(s.labels, group)
        if s.name == base + "_bucket":
            le = _parse_le(s)
            if le is None:
                continue
            b = buckets.setdefault(key, {})
            b[le] = b.get(le, 0.0) + s.value
        elif s.name == base + "_sum":
            sums[key] = sums.get(key, 0.0) + s.value
        elif s.name == base + "_count":
            counts[key] = counts.get(key, 0.0) + s.value
    out: dict[tuple[str, ...], Hist] = {}
    for key in set(buckets) | set(counts):
        b = buckets.get(key, {})
        bounds = tuple(sorted(b))
        cum = tuple(b[x] for x in bounds)
        count = counts.get(key, cum[-1] if cum else 0.0)
        out[key] = Hist(
            bounds=tuple(x * scale if not math.isinf(x) else x for x in bounds),
            cumulative=cum,
            sum=sums.get(key, 0.0) * scale,
            count=count,
        )
    return out


def _parse_le(s: Sample) -> float | None:
    le = s.labels.get("le")
    if le is None:
        return None
    try:
        return float(le)
    except ValueError:
        return None


def _merge_hist(a: Hist, b: Hist) -> Hist:
    if a.bounds == b.bounds:
        cum = tuple(x + y for x, y in zip(a.cumulative, b.cumulative, strict=True))
        return Hist(a.bounds, cum, a.sum + b.sum, a.count + b.count)
    # Different layouts (vLLM and SGLang serving one model): the cumulative count at a bound
    # both have is exact, so the merge keeps the shared bounds (a coarser histogram, still
    # exact); with no shared finite bound only the mean is left.
    ia = {x: i for i, x in enumerate(a.bounds)}
    ib = {x: i for i, x in enumerate(b.bounds)}
    common = tuple(x for x in a.bounds if x in ib)
    if len(common) < 2 or not math.isinf(common[-1]) or len(a.cumulative) != len(a.bounds) \
            or len(b.cumulative) != len(b.bounds):
        return Hist((), (), a.sum + b.sum, a.count + b.count)
    cum = tuple(a.cumulative[ia[x]] + b.cumulative[ib[x]] for x in common)
    return Hist(common, cum, a.sum + b.sum, a.count + b.count)


MAX_GAUGES = frozenset({"kv_usage", "prefix_hit_rate_gauge", "spec_accept_rate_gauge"})
"""Gauges aggregated across ranks by max (the busiest rank; for ratios, never a sum above
1), not by sum."""


def put_value(m: ModelSample, kind: str, name: str, value: Any,
              label: str | None = None) -> None:
    """Set ``m``'s ``kind`` (gauges, counters, hists, info) value ``name``; with ``label``,
    the value of that label in the declared family ``name`` (``model.LABELLED``)."""
    if label is None:
        getattr(m, kind)[name] = value
    elif name not in LABELLED[kind]:
        raise KeyError(f"{name} is no labelled {kind} family (model.LABELLED)")
    else:
        m.labelled(kind).setdefault(name, {})[label] = value


def add_value(m: ModelSample, kind: str, name: str, value: float,
              label: str | None = None) -> None:
    """Add ``value`` to ``m``'s value ``name`` (or label ``label`` of family ``name``), which
    starts at 0 (``put_value``)."""
    if label is None:
        d = getattr(m, kind)
        d[name] = d.get(name, 0.0) + value
    else:
        put_value(m, kind, name, m.labelled(kind).get(name, {}).get(label, 0.0) + value, label)


def _sum_labelled(into: dict[str, dict[str, float]], part: dict[str, dict[str, float]]
                  ) -> None:
    for fam, per in part.items():
        have = into.setdefault(fam, {})
        for label, v in per.items():
            have[label] = have.get(label, 0.0) + v


def aggregate(model: str, parts: list[ModelSample]) -> ModelSample:
    """Aggregate per-rank samples of one model: sum counters, gauges and histograms
    (``kv_usage`` and the hit-rate/acceptance gauges take the max), per label in the
    labelled families too. Info comes from the first rank."""
    if len(parts) == 1:  # one rank, the usual engine: the same values, copied in C
        p = parts[0]
        return ModelSample(model=model, gauges=dict(p.gauges), counters=dict(p.counters),
                           hists=dict(p.hists), info=dict(p.info),
                           gauges_by={k: dict(v) for k, v in p.gauges_by.items()},
                           counters_by={k: dict(v) for k, v in p.counters_by.items()},
                           hists_by={k: dict(v) for k, v in p.hists_by.items()})
    out = ModelSample(model=model)
    hists: dict[str, list[Hist]] = {}
    hists_by: dict[tuple[str, str], list[Hist]] = {}
    for p in parts:
        _sum_labelled(out.gauges_by, p.gauges_by)
        _sum_labelled(out.counters_by, p.counters_by)
        for fam, per in p.hists_by.items():
            for label, h in per.items():
                hists_by.setdefault((fam, label), []).append(h)
        for k, v in p.gauges.items():
            if k in MAX_GAUGES:
                out.gauges[k] = max(out.gauges.get(k, v), v)
            else:
                out.gauges[k] = out.gauges.get(k, 0.0) + v
        for k, v in p.counters.items():
            out.counters[k] = out.counters.get(k, 0.0) + v
        for k, h in p.hists.items():
            hists.setdefault(k, []).append(h)
        for k, v in p.info.items():
            out.info.setdefault(k, v)
    for k, hs in hists.items():
        out.hists[k] = _merge_all(hs)
    for (fam, label), hs in hists_by.items():
        out.hists_by.setdefault(fam, {})[label] = _merge_all(hs)
    return out


def _merge_all(hs: list[Hist]) -> Hist:
    """``_merge_hist`` folded over ``hs``; the histograms of one layout (fleet totals of
    hundreds of instances) are summed column by column in one pass first."""
    if len(hs) == 1:
        return hs[0]
    by_layout: dict[tuple[float, ...], list[Hist]] = {}
    parts: list[Hist] = []
    for h in hs:
        if len(h.cumulative) == len(h.bounds):
            by_layout.setdefault(h.bounds, []).append(h)
        else:
            parts.append(h)  # inconsistent: left to _merge_hist
    for bounds, group in by_layout.items():
        cum = tuple(map(sum, zip(*(h.cumulative for h in group), strict=True)))
        parts.append(Hist(bounds, cum, sum(h.sum for h in group), sum(h.count for h in group))
                     if len(group) > 1 else group[0])
    out = parts[0]
    for h in parts[1:]:
        out = _merge_hist(out, h)
    return out


def sample_index(families: dict[str, Family]) -> dict[str, list[Sample]]:
    """All samples keyed by sample name with one trailing ``_total`` removed.

    Robust to how a parser groups or renames series: untyped ``x_total``, and a ``# TYPE x
    counter`` sample written ``x`` (which ``prometheus_client`` renames ``x_total``) both land
    under ``x``. Look counters up without ``_total``; ``_bucket``/``_sum``/``_count`` keep theirs.
    """
    out: dict[str, list[Sample]] = {}
    for fam in families.values():
        for s in fam.samples:
            out.setdefault(s.name.removesuffix("_total"), []).append(s)
    return out


def hist_family(index: dict[str, list[Sample]], base: str) -> Family | None:
    """A histogram/summary ``Family`` named ``base`` rebuilt from a ``sample_index``.

    Takes ``base_bucket``/``base_sum``/``base_count`` samples, and also ``base`` samples that
    carry an ``le`` label (a documented Triton example omits ``_bucket``) or a ``quantile``
    label (summaries). None when no sample exists.
    """
    samples: list[Sample] = []
    for suffix in ("_bucket", "_sum", "_count"):
        samples.extend(index.get(base + suffix, ()))
    for s in index.get(base, ()):
        if "le" in s.labels:
            samples.append(Sample(base + "_bucket", s.labels, s.value))
        elif "quantile" in s.labels:
            samples.append(s)
    if not samples:
        return None
    return Family(base, "histogram", samples=samples)


def identity_host(identity: dict[str, Any] | None) -> str:
    """The target host passed by the store as ``identity["host"]`` ("" when absent)."""
    host = identity.get("host") if identity else None
    return host if isinstance(host, str) else ""


def parse_engine_text(
    body: str, prefix: str, want: Callable[[str], bool], why: str
) -> dict[str, Family]:
    """Parse exposition text that must hold the engine's ``prefix`` families; a payload
    with none of them (a wrong hint, another exporter) is a ParseError saying ``why``."""
    families = parse(body, want=want)
    if not any(n.startswith(prefix) for n in families) and prefix not in body:
        raise ParseError(f"no {prefix} metrics ({why})")
    return families


def assemble(engine: str, parts: dict[tuple[str, str | None], ModelSample]) -> EngineSample:
    """Per (model, rank) samples -> an EngineSample: one aggregate per model, and the
    per-rank samples (ordered by model, then numeric rank) only when there are several."""
    by_model: dict[str, list[ModelSample]] = {}
    for (model, _rank), p in parts.items():
        by_model.setdefault(model, []).append(p)
    ranks: list[ModelSample] = []
    if len({r for _m, r in parts if r is not None}) > 1:
        ranks = sorted((p for (_m, r), p in parts.items() if r is not None),
                       key=lambda p: (p.model, *_rank_order(p.rank)))
    return EngineSample(engine=engine, models=[aggregate(m, ps) for m, ps in by_model.items()],
                        ranks=ranks)


def _rank_order(rank: str | None) -> tuple[int, str]:
    r = rank or ""
    return (int(r), r) if r.isdigit() else (1 << 30, r)


def outcome_counters(
    m: ModelSample,
    ok: float | None,
    fails: dict[str, float] | None,
    *,
    rejected: str | None = None,
    aborted: str | None = None,
) -> None:
    """Fill the finish/error counters of ``m`` from a success count and failures by reason:
    ``finished`` ``success`` and ``error``, ``errors`` (= ``finished`` ``error``), ``error`` by
    reason, ``rejected`` and ``aborted`` (from the named reasons) and ``requests`` =
    success + failure. ``fails`` None means the engine reports no failure counter."""
    counters = m.counters
    if ok is not None:
        put_value(m, "counters", "finished", ok, "success")
    total_fail = sum(fails.values()) if fails is not None else None
    if fails is not None and total_fail is not None:
        counters["errors"] = total_fail
        put_value(m, "counters", "finished", total_fail, "error")
        for reason, v in fails.items():
            if reason:
                put_value(m, "counters", "error", v, reason)
        if rejected is not None and rejected in fails:
            counters["rejected"] = fails[rejected]
        if aborted is not None and aborted in fails:
            counters["aborted"] = fails[aborted]
    counters["requests"] = (ok or 0.0) + (total_fail or 0.0)


def identity_version(identity: dict[str, Any] | None) -> str | None:
    """An engine version string from identity endpoints, when one was learned."""
    if not identity:
        return None
    v = identity.get("version")
    if isinstance(v, (str, int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def identity_model(identity: dict[str, Any] | None, default: str = "default") -> str:
    """The served model name for single-model engines without a model label.

    Looks at ``model_id`` (TGI ``/info``), ``model``, ``model_path`` (llama.cpp ``/props``)
    and the first of ``models``; else ``default``.
    """
    if identity:
        for key in ("model_id", "model", "model_name", "model_path"):
            v = identity.get(key)
            if isinstance(v, str) and v:
                return v
        models = identity.get("models")
        if isinstance(models, list) and models:
            first = models[0]
            if isinstance(first, str) and first:
                return first
            if isinstance(first, dict):
                for key in ("id", "name", "model"):
                    v = first.get(key)
                    if isinstance(v, str) and v:
                        return v
    return default
