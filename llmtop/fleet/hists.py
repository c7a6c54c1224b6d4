"""A fleet group's histograms straight from the answer series, and the buckets a filtered
query left out put back (``Plan.filtered``/``Plan.zero_cut``: only the bounds strictly
between 0 and the ``_count`` rate are asked). ``direct_hists`` serves the adapters read
without text (vLLM, SGLang, LMDeploy), ``fill_series`` the ones read through exposition
text. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from llmtop.fleet.queries import Layouts
from llmtop.model import EngineSample, Hist, ModelSample
from llmtop.parse.common import aggregate

__all__ = ["Series", "attach", "direct_hists", "fill_series"]

Series = tuple[dict[str, str], float]
"""One answer series: its labels (without the ``llmtop_name`` tag) and value."""


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


def attach(sample: EngineSample, hists: dict[str, dict[Any, Hist]]) -> None:
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
