"""Query answers -> the same ``EngineRow``/``GpuRecord`` objects the direct mode shows.

The answers of one refresh are split by group (``Plan.group`` label values); each group's
series are written back as exposition text and read by the engine's own adapter in
``llmtop/parse``, so every metric-name generation and label convention the direct mode knows
applies here too. The adapter's "counters" are then per-second rates over the window and its
histograms hold bucket *rates*: quantiles of those are PromQL's ``histogram_quantile`` of
``sum by (group, le) (rate(X_bucket[W]))`` (``history.derive.bucket_quantile``; a quantile in
the lowest bucket is reported as that bucket's bound and listed in ``Quantiles.below``, as in
direct mode). Totals per model add the groups' rates and bucket rates, then take quantiles.
Pure: no I/O.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llmtop.fleet.queries import Layouts
from llmtop.history.derive import hist_quantiles
from llmtop.history.rows import ROW_HISTS, fill_gauges
from llmtop.model import (
    EngineRow,
    EngineSample,
    GpuRecord,
    Hist,
    ModelSample,
    Quantiles,
)
from llmtop.parse.common import aggregate
from llmtop.parse.detect import engine_from_body
from llmtop.parse.exposition import Family, ParseError, Sample
from llmtop.parse.registry import normalize

__all__ = [
    "Group",
    "Series",
    "build_rows",
    "direct_hists",
    "families_of",
    "fill_series",
    "gpu_records",
    "group_samples",
    "model_totals",
    "render",
    "row_from_sample",
    "split_groups",
    "target_name",
]

Series = tuple[dict[str, str], float]
"""One answer series: its labels (without the ``llmtop_name`` tag) and value."""

_TARGET_LABELS = frozenset(("instance", "job", "pod", "namespace", "container", "endpoint",
                            "service", "node", "prometheus", "prometheus_replica", "replica"))


@dataclass(slots=True)
class Group:
    """All series of one row group (one instance, or one namespace/pod)."""

    key: tuple[str, ...]
    labels: dict[str, str]
    series: dict[str, list[Series]] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)


def split_groups(results: Iterable[list[dict[str, Any]]], group: tuple[str, ...]
                 ) -> dict[tuple[str, ...], Group]:
    """Answer series (``{"metric": ..., "value": [t, "v"]}``) by group key; NaN dropped.

    The answers' ``metric`` dicts are used (and their tag popped) in place, not copied."""
    out: dict[tuple[str, ...], Group] = {}
    one = group[0] if len(group) == 1 else None
    last: tuple[Any, Any, Any, list[Series]] | None = None
    for result in results:
        for item in result:
            try:  # the API's shape: one lookup each, the odd item takes the slow path
                metric = item["metric"]
                name = metric.pop("llmtop_name", None) or metric.pop("__name__")
                v = float(item["value"][1])
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                continue
            if v != v or not name:
                continue  # NaN (an idle histogram's quantile input) is "no value", never 0
            if one is not None:
                kv = metric.get(one, "")
                # a bucket answer lists one histogram's series one after another
                if last is not None and last[0] == kv and last[1] == name and \
                        last[2] == metric.get("job"):
                    last[3].append((metric, v))
                    continue
                key: tuple[str, ...] = (kv,)
            else:
                kv = None
                key = tuple([metric.get(x, "") for x in group])
            g = out.get(key)
            if g is None:
                g = out[key] = Group(key, {k: x for k, x in zip(group, key, strict=True) if x})
            job = metric.get("job")
            if job and job not in g.jobs:
                g.jobs.add(job)
            lst = g.series.get(name)
            if lst is None:
                lst = g.series[name] = [(metric, v)]
            else:
                lst.append((metric, v))
            if kv is not None:
                last = (kv, name, job, lst)
    return out


_NEEDS_ESCAPE = re.compile(r'[\\"\n]')


def _esc(v: str) -> str:
    if _NEEDS_ESCAPE.search(v) is None:
        return v
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_PREFIXES: dict[tuple[str, frozenset[str], tuple[tuple[str, str], ...]], str] = {}
"""(name, dropped labels, labels) -> the line up to its value: the groups of a fleet repeat
the same series (only the group's own labels differ, and those are dropped)."""
_PREFIXES_MAX = 200_000


def _line(name: str, labels: dict[str, str], value: float, drop: frozenset[str]) -> str:
    key = (name, drop, tuple([kv for kv in labels.items() if kv[0] not in drop]))
    head = _PREFIXES.get(key)
    if head is None:
        # the API writes labels sorted: the same series gives the same line in every group
        inner = ",".join([f'{k}="{_esc(v)}"' for k, v in key[2] if v])
        head = f"{name}{{{inner}}}" if inner else name
        if len(_PREFIXES) >= _PREFIXES_MAX:
            _PREFIXES.clear()
        _PREFIXES[key] = head
    val = repr(value) if math.isfinite(value) else ("+Inf" if value > 0 else "-Inf")
    return f"{head} {val}"


def render(series: dict[str, list[Series]], drop: Iterable[str] = ()) -> str:
    """Exposition text of one group's series (histogram parts together under their TYPE
    line), for the adapters. ``drop``: labels left out (the group's own)."""
    dropset = frozenset(drop) | {"llmtop_name", "__name__"}
    bases = {n[:-7] for n in series if n.endswith("_bucket")}
    lines: list[str] = []
    done: set[str] = set()
    for name in sorted(series):
        if name in done:
            continue
        base = next((name[: -len(s)] for s in ("_bucket", "_sum", "_count")
                     if name.endswith(s) and name[: -len(s)] in bases), None)
        if base is not None:
            lines.append(f"# TYPE {base} histogram")
            for part in (base + "_bucket", base + "_sum", base + "_count"):
                done.add(part)
                for labels, v in series.get(part, ()):
                    lines.append(_line(part, labels, v, dropset))
            continue
        done.add(name)
        if name.endswith("_total"):
            lines.append(f"# TYPE {name} counter")
        elif name.endswith("_info"):
            lines.append(f"# TYPE {name} gauge")
            for labels, v in series[name]:
                info = {k: x for k, x in labels.items() if k not in _TARGET_LABELS}
                lines.append(_line(name, info, v, dropset))
            continue
        for labels, v in series[name]:
            lines.append(_line(name, labels, v, dropset))
    return "\n".join(lines) + "\n"


def _families(series: dict[str, list[Series]]
              ) -> list[tuple[str | None, dict[str, list[Series]]]]:
    """A group's series split by engine family (a ``--group-by job`` group may hold vLLM and
    SGLang); Triton's vLLM backend (``nv_`` and ``vllm:`` together) stays one."""
    from llmtop.fleet.queries import engine_of

    parts: dict[str, dict[str, list[Series]]] = {}
    shared: dict[str, list[Series]] = {}
    for name, items in series.items():
        e = engine_of(name)
        if e is None:
            shared[name] = items
        else:
            parts.setdefault(e, {})[name] = items
    if "triton" in parts and "vllm" in parts:
        parts["triton"].update(parts.pop("vllm"))
    return [(e, p | shared) for e, p in parts.items()] or [(None, shared)]


_FAMILY_ADAPTERS = ("vllm", "sglang", "lmdeploy")
"""Adapters with ``normalize_families``: fed ``Family`` objects directly, no text round trip."""


_INTERN: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
"""Label sets (without the group's labels) -> one shared dict, as the text parser shares one
dict per series: the adapters' per-series caches then hit across groups and refreshes."""
_INTERN_MAX = 200_000


def _interned(labels: dict[str, str], drop: frozenset[str]) -> dict[str, str]:
    key = tuple([kv for kv in labels.items() if kv[0] not in drop])
    d = _INTERN.get(key)
    if d is None:
        if len(_INTERN) >= _INTERN_MAX:
            _INTERN.clear()
        d = _INTERN[key] = dict(key)
    return d


def families_of(series: dict[str, list[Series]], drop: Iterable[str] = ()
                ) -> dict[str, Family]:
    """The ``Family`` objects the text parser would make of ``render(series, drop)``
    (histogram parts under their base, ``x_total`` under ``x``); info series keep only
    their own labels, as ``render`` writes them, and histogram parts shared label dicts
    (``group_hists`` keeps its layout per labels). Gauges and counters keep the answer's
    dicts, ``drop`` labels too: the adapters read only their own labels of those."""
    dropset = frozenset(drop)
    bases = {n[:-7] for n in series if n.endswith("_bucket")}
    fams: dict[str, Family] = {}
    for name, items in series.items():
        base, typ = name, "gauge"
        for sfx in ("_bucket", "_sum", "_count"):
            if name.endswith(sfx) and name[: -len(sfx)] in bases:
                base, typ = name[: -len(sfx)], "histogram"
                break
        else:
            if name.endswith("_total"):
                base, typ = name[:-6], "counter"
        fam = fams.get(base)
        if fam is None:
            fam = fams[base] = Family(base, typ)
        if typ == "histogram" or name.endswith("_info"):
            skip = dropset | _TARGET_LABELS if name.endswith("_info") else dropset
            fam.samples.extend([Sample(name, _interned(labels, skip), v)
                                for labels, v in items])
        else:
            fam.samples.extend([Sample(name, labels, v) for labels, v in items])
    return fams


_LE: dict[str, float | None] = {}
"""``le`` label text -> bound (None when not a number): a fleet repeats a few dozen texts."""


def _bound(text: str | None) -> float | None:
    le = _LE.get(text)  # type: ignore[arg-type]
    if le is None and text not in _LE:
        try:
            le = float(text)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            le = None
        if le is not None and le != le:
            le = None
        if len(_LE) < 10_000:
            _LE[text] = le  # type: ignore[index]
    return le


def _filled(b: dict[float, float], layout: tuple[float, ...], count: float,
            total: float | None) -> tuple[float, ...] | None:
    """A filtered answer's buckets put back on the layout (the query asked only the bounds
    strictly between 0 and the ``_count`` rate): a bound below the lowest one sent was 0, one
    above the highest was the count. With none sent, every observation fell in one bucket:
    the one holding the mean (``total / count``). None when that cannot be known (no sum)."""
    m = len(b)
    if m:
        lo = min(b)
        i = layout.index(lo)
        try:  # the usual shape: m neighbouring bounds sent, zeros below, the count above
            mid = tuple(map(b.__getitem__, layout[i:i + m]))
            return (0.0,) * i + mid + (count,) * (len(layout) - i - m)
        except KeyError:
            pass
        hi = max(b)
        out, last = [], 0.0
        for le in layout:
            v = b.get(le)
            if v is None:  # a gap between two sent bounds: the lower value (monotone)
                v = 0.0 if le < lo else count if le > hi else last
            out.append(v)
            last = v
        return tuple(out)
    if not count > 0:
        return (count,) * len(layout)
    if total is None or total != total:
        return None
    mean = total / count
    for j, le in enumerate(layout):  # the first bound at or above the mean (float slack)
        if mean <= le * (1 + 1e-9) or le == math.inf:
            return (0.0,) * j + (count,) * (len(layout) - j)
    return None


_PARTS: dict[int, tuple[Mapping[str, tuple[str, ...]], dict[str, tuple[str, int, int]]]] = {}
"""An adapter's ``HIST_FAMILIES`` (by id) -> series name -> (hist key, alias index, part)."""


def _parts_of(table: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, int, int]]:
    got = _PARTS.get(id(table))
    if got is None or got[0] is not table:
        parts = {n + sfx: (hkey, i, j) for hkey, names in table.items()
                 for i, n in enumerate(names)
                 for j, sfx in enumerate(("_bucket", "_sum", "_count"))}
        got = _PARTS[id(table)] = (table, parts)
    return got[1]


def direct_hists(series: dict[str, list[Series]], table: Mapping[str, tuple[str, ...]],
                 key: Any, layouts: Layouts | None = None
                 ) -> tuple[dict[str, list[Series]], dict[str, dict[Any, Hist]]]:
    """The adapter's histograms built straight from the answer series (no ``Family`` objects):
    ``table`` is its ``HIST_FAMILIES`` (key -> aliases, the first present is read, as the
    adapter's own ``_first``), ``key`` its ``hist_key``. Returns the other series (every
    alias's parts removed, so the adapter sees no histogram) and hist key -> (model, rank) ->
    ``Hist`` as ``group_hists`` makes it (buckets and ``_sum``/``_count`` summed per key).
    ``layouts``: the names asked below their count (``Plan.filtered``), filled back here."""
    where = _parts_of(table)
    rest: dict[str, list[Series]] = {}
    found: dict[str, dict[int, list[list[Series] | None]]] = {}
    for name, items in series.items():
        w = where.get(name)
        if w is None:
            rest[name] = items
        else:
            parts = found.setdefault(w[0], {}).setdefault(w[1], [None, None, None])
            parts[w[2]] = items
    out: dict[str, dict[Any, Hist]] = {}
    for hkey, names in table.items():
        present = [i for i, p in (found.get(hkey) or {}).items() if any(p)]
        if not present:
            continue
        aliases = found[hkey]
        first = min(present)  # the first alias present is read
        chosen, chosen_name = tuple(aliases[first]), names[first]
        layout = layouts.get(chosen_name + "_bucket") if layouts else None
        buckets: dict[Any, dict[float, float]] = {}
        sums: dict[Any, float] = {}
        counts: dict[Any, float] = {}
        shared = False  # two series under one key: each is filled on its own, then summed
        for acc, items in ((sums, chosen[1]), (counts, chosen[2])):
            for labels, v in items or ():
                k = key(labels)
                if k is not None:
                    if k in acc:
                        shared = True
                    acc[k] = acc.get(k, 0.0) + v
        if layout is not None and layouts is not None and shared:
            bn, cn = chosen_name + "_bucket", chosen_name + "_count"
            filled = fill_series({bn: chosen[0] or [], cn: chosen[2] or [],
                                  chosen_name + "_sum": chosen[1] or []}, layouts)
            chosen, layout = (filled.get(bn, []), chosen[1], chosen[2]), None
        known = _LE
        for labels, v in chosen[0] or ():
            k = key(labels)
            text = labels.get("le")
            le = known[text] if text in known else _bound(text)  # type: ignore[index]
            if k is None or le is None:
                continue
            b = buckets.get(k)
            if b is None:
                b = buckets[k] = {}
            b[le] = b.get(le, 0.0) + v
        hists: dict[Any, Hist] = {}
        for k in buckets.keys() | counts.keys():
            b = buckets.get(k, {})
            c = counts.get(k)
            if layout is not None and layouts is not None and c is not None:
                if not b.keys() <= layouts.bounds(chosen_name):  # not in the layout: mean only
                    layouts.stale.add(chosen_name + "_bucket")
                    hists[k] = Hist((), (), sums.get(k, math.nan), c)
                    continue
                cum = _filled(b, layout, c, sums.get(k))
                hists[k] = (Hist(layout, cum, sums.get(k, math.nan), c) if cum is not None
                            else Hist((), (), sums.get(k, math.nan), c))
                continue
            bounds = tuple(sorted(b))
            cum = tuple(map(b.__getitem__, bounds))
            hists[k] = Hist(bounds=bounds, cumulative=cum, sum=sums.get(k, math.nan),
                            count=c if c is not None else (cum[-1] if cum else 0.0))
        out[hkey] = hists
    return rest, out


def _attach(sample: EngineSample, hists: dict[str, dict[Any, Hist]]) -> None:
    """Put direct histograms on a sample's ranks (by (model, rank)) and models (the ranks'
    histograms merged, as ``aggregate`` merges them)."""
    for r in sample.ranks:
        for hkey, per in hists.items():
            h = per.get((r.model, r.rank))
            if h is not None:
                r.hists[hkey] = h
    for m in sample.models:
        for hkey, per in hists.items():
            hs = [h for k, h in per.items() if k[0] == m.model]
            if hs:
                m.hists[hkey] = hs[0] if len(hs) == 1 else aggregate(
                    m.model, [ModelSample(m.model, hists={hkey: h}) for h in hs]).hists[hkey]


def _le_text(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


def fill_series(series: dict[str, list[Series]], layouts: Layouts) -> dict[str, list[Series]]:
    """``series`` with the buckets a filtered query left out put back (``_filled``, each
    series on its own, with its ``_count`` and ``_sum``), for the adapters read through
    exposition text; a name showing a bound its layout lacks keeps no buckets (mean only)
    and is marked stale, as does one whose fill cannot be known (no ``_sum``), unmarked."""
    out = dict(series)
    names = [n for n in series if n.endswith("_bucket")]
    # a histogram whose every observation fell in one bucket has no bucket sent at all
    names += [b for n in series if n.endswith("_count")
              and (b := n[:-6] + "_bucket") in layouts and b not in series]
    for name in names:
        layout = layouts.get(name)
        if layout is None:
            continue
        items = series.get(name, [])
        bounds = set(layout)
        have: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
        for labels, v in items:
            le = _bound(labels.get("le"))
            if le not in bounds:
                layouts.stale.add(name)
                del out[name]
                break
            k = tuple(sorted(kv for kv in labels.items() if kv[0] != "le"))
            have.setdefault(k, {})[le] = v  # type: ignore[index]
        else:
            base = name[:-7]
            sums = {tuple(sorted(lab.items())): v for lab, v in series.get(base + "_sum", ())}
            filled = []
            for labels, c in series.get(base + "_count", ()):
                k = tuple(sorted(labels.items()))
                cum = _filled(have.get(k, {}), layout, c, sums.get(k))
                if cum is None:
                    filled = None
                    break
                filled.extend(({**labels, "le": _le_text(b)}, v)
                              for b, v in zip(layout, cum, strict=True))
            if filled is None:
                out.pop(name, None)
            else:
                out[name] = filled
    return out


def group_samples(g: Group, drop: Iterable[str], layouts: Layouts | None = None
                  ) -> list[EngineSample]:
    """The adapters' reading of one group, one sample per engine family (counters are rates).

    vLLM, SGLang and LMDeploy: histograms straight from the series (``direct_hists``, with
    the adapter's own name table and key), the rest as ``Family`` objects; other engines:
    exposition text read by their adapter."""
    out = []
    for engine_hint, series in _families(g.series):
        if engine_hint in _FAMILY_ADAPTERS:
            mod = importlib.import_module(f"llmtop.parse.{engine_hint}")
            rest, hists = direct_hists(series, mod.HIST_FAMILIES, mod.hist_key, layouts)
            try:
                sample = mod.normalize_families(families_of(rest, drop))
            except ParseError:
                continue
            _attach(sample, hists)
            out.append(sample)
            continue
        text = render(fill_series(series, layouts) if layouts else series, drop)
        engine = engine_from_body(text)
        if engine is None or engine == "dcgm":
            continue
        try:
            out.append(normalize(engine, text))
        except ParseError:
            continue
    return out


def _quantiles(m: ModelSample, key: str, window_s: float) -> Quantiles | None:
    h = m.hists.get(key)
    if h is None:
        return None
    # rates -> counts over the window: quantiles and the mean do not change with the scale,
    # only the observation count does
    q = hist_quantiles(h.bounds, h.cumulative, h.sum, h.count)
    q.count = max(0.0, h.count * window_s)
    return q


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or not den > 0:
        return None
    return min(1.0, max(0.0, num / den))


def row_from_sample(row: EngineRow, m: ModelSample, window_s: float) -> EngineRow:
    """Fill ``row`` from one model's rates (``m.counters`` per second, ``m.hists`` bucket
    rates) and gauges; absent stays None."""
    g, c = m.gauges, m.counters
    fill_gauges(row, m)
    row.prompt_tokens_per_s = c.get("prompt_tokens")
    row.generation_tokens_per_s = c.get("generation_tokens")
    row.preemptions_per_s = c.get("preemptions")
    finished = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("finished:")}
    req = c.get("requests")
    if req is None and finished:
        req = sum(finished.values())
    row.requests_per_s = req
    row.errors_per_s = c.get("errors", c.get("finished:error"))
    row.finished = {k: v * window_s for k, v in finished.items()} if finished else None
    if "prefix_hits" in c and "prefix_queries" in c:
        row.prefix_hit_rate = _ratio(c["prefix_hits"], c["prefix_queries"])
    else:
        row.prefix_hit_rate = g.get("prefix_hit_rate_gauge")
    acc = _ratio(c.get("spec_accepted_tokens"), c.get("spec_draft_tokens"))
    row.spec_accept_rate = acc if acc is not None else g.get("spec_accept_rate_gauge")
    for key, attr in ROW_HISTS.items():
        setattr(row, attr, _quantiles(m, key, window_s))
    return row


def build_rows(groups: dict[tuple[str, ...], Group], group: tuple[str, ...], window_s: float,
               layouts: Layouts | None = None
               ) -> tuple[list[EngineRow], dict[tuple[str, ...], EngineSample]]:
    """One row per (group, model), ranks folded in; and each group's sample (for totals).
    ``layouts``: the plan's filtered bucket names (``direct_hists``)."""
    rows: list[EngineRow] = []
    samples: dict[tuple[str, ...], EngineSample] = {}
    for key in sorted(groups):
        g = groups[key]
        found = group_samples(g, group, layouts)
        target = target_name(g.labels, group)
        labels = dict(g.labels)
        if g.jobs:
            labels["job"] = ",".join(sorted(g.jobs))
        for i, sample in enumerate(found):
            samples[(*key, str(i))] = sample
            for m in sample.models:
                # one engine per group is the rule; a mixed group keys rows by engine too
                mk = m.model if len(found) == 1 else f"{sample.engine}:{m.model}"
                row = EngineRow(key=f"{target}|{mk}", target=target, engine=sample.engine,
                                model=m.model, labels=labels)
                row_from_sample(row, m, window_s)
                for r in sample.ranks:
                    if r.model == m.model:
                        rr = EngineRow(key=f"{target}|{mk}|{r.rank}", target=target,
                                       engine=sample.engine, model=m.model, rank=r.rank,
                                       labels=labels)
                        row.ranks.append(row_from_sample(rr, r, window_s))
                rows.append(row)
    return rows, samples


def target_name(labels: dict[str, str], group: tuple[str, ...]) -> str:
    """``instance`` when it is the group, else the group's label values joined by ``/``."""
    if group == ("instance",):
        return labels.get("instance", "") or "-"
    return "/".join(labels.get(g, "") for g in group) or "-"


def model_totals(samples: Iterable[EngineSample], window_s: float) -> list[EngineRow]:
    """Per model: rates summed over groups, quantiles from the summed bucket rates."""
    by_model: dict[str, list[ModelSample]] = {}
    engines: dict[str, str] = {}
    for s in samples:
        for m in s.models:
            by_model.setdefault(m.model, []).append(m)
            # one engine id when every row of the model runs it; None for a mixed model
            engines[m.model] = s.engine if engines.get(m.model, s.engine) == s.engine else ""
    out = []
    for model in sorted(by_model):
        parts = by_model[model]
        agg = aggregate(model, parts)
        # KV usage of a model is the worst instance (aggregate's max), running/waiting sums.
        row = EngineRow(key=f"total|{model}", target=f"total ({len(parts)})",
                        engine=engines[model] or None, model=model)
        out.append(row_from_sample(row, agg, window_s))
    return out


def gpu_records(series: dict[str, list[Series]]) -> list[GpuRecord]:
    """DCGM exporter series -> ``GpuRecord`` via the DCGM adapter, one host at a time (the
    ``Hostname`` label, else the instance's host)."""
    by_host: dict[str, dict[str, list[Series]]] = {}
    for name, items in series.items():
        for labels, v in items:
            lab = dict(labels)
            for k in ("pod", "namespace", "container"):
                if lab.get("exported_" + k):
                    lab[k] = lab.pop("exported_" + k)
            host = lab.get("Hostname") or lab.get("instance", "").rsplit(":", 1)[0]
            by_host.setdefault(host, {}).setdefault(name, []).append((lab, v))
    out: list[GpuRecord] = []
    for host in sorted(by_host):
        text = render(by_host[host], ("instance", "job", "endpoint", "service"))
        try:
            sample = normalize("dcgm", text, identity={"host": host})
        except ParseError:
            continue
        out.extend(sample.gpus)
    return out
