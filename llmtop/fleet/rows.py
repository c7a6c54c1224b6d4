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
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from llmtop.fleet.hists import Series, attach, direct_hists, fill_series
from llmtop.fleet.queries import Layouts
from llmtop.history.derive import EST_RATE_KEYS, hist_quantiles
from llmtop.history.rows import ROW_HISTS, fill_achieved, fill_gauges
from llmtop.model import (
    EngineRow,
    EngineSample,
    GpuRecord,
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
    "families_of",
    "gpu_records",
    "group_samples",
    "model_totals",
    "render",
    "row_from_sample",
    "split_groups",
    "target_name",
]

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

    The answers' ``metric`` dicts are used (and their tag popped) in place, not copied. A
    series of the same group, name and job as the one before (a bucket answer lists one
    histogram's series one after another) is appended without a lookup."""
    one = group[0] if len(group) == 1 else None  # the default (instance): no key tuple
    out: dict[Any, Group] = {}
    last_kv: Any = None
    last_name: str | None = None
    last_job: str | None = None
    last_lst: list[Series] = []
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
            kv = metric.get(one, "") if one is not None else \
                tuple([metric.get(x, "") for x in group])
            job = metric.get("job")
            if kv == last_kv and name == last_name and job == last_job:
                last_lst.append((metric, v))
                continue
            g = out.get(kv)
            if g is None:
                key = (kv,) if one is not None else kv
                g = out[kv] = Group(key, {k: x for k, x in zip(group, key, strict=True) if x})
            if job and job not in g.jobs:
                g.jobs.add(job)
            lst = g.series.get(name)
            if lst is None:
                lst = g.series[name] = [(metric, v)]
            else:
                lst.append((metric, v))
            last_kv, last_name, last_job, last_lst = kv, name, job, lst
    return {g.key: g for g in out.values()}


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
            attach(sample, hists)
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
    finished = m.counters_by.get("finished", {})
    req = c.get("requests")
    if req is None and finished:
        req = sum(finished.values())
    row.requests_per_s = req
    row.errors_per_s = c.get("errors", finished.get("error"))
    row.finished = {k: v * window_s for k, v in finished.items()} if finished else None
    if "prefix_hits" in c and "prefix_queries" in c:
        row.prefix_hit_rate = _ratio(c["prefix_hits"], c["prefix_queries"])
    else:
        row.prefix_hit_rate = g.get("prefix_hit_rate_gauge")
    acc = _ratio(c.get("spec_accepted_tokens"), c.get("spec_draft_tokens"))
    row.spec_accept_rate = acc if acc is not None else g.get("spec_accept_rate_gauge")
    for key, attr in ROW_HISTS.items():
        setattr(row, attr, _quantiles(m, key, window_s))
    fill_achieved(row, _achieved(c))
    return row


def _achieved(c: dict[str, float]) -> dict[str, float | None]:
    """The engine's FLOP/byte rates (``rate(vllm:estimated_*[W])``), only while it counts:
    a rate above 0. Fleet mode sees rates, not the counters, so an engine that counts but
    moved nothing in the window reads like one that does not count (None and the hint),
    never a 0 that could be a flag left off."""
    rates = {name: c.get(key) for name, key in EST_RATE_KEYS.items()}
    if not any(v and v > 0 for v in rates.values()):
        return {}
    return rates


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
        row_from_sample(row, agg, window_s)
        fill_achieved(row, {})  # per-GPU rates do not add up over instances: none on a total
        row.mfu_hint = None
        out.append(row)
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
