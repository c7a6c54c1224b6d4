"""Helpers shared by the router adapters: per-worker values, the policy, roles.

A router adapter returns an ``EngineSample`` without models whose ``extra["router"]`` is a
``model.stack.RouterSample``: router-level counters, gauges and histograms (its declared
fields), and one ``BackendSample`` per worker URL (the ``worker`` label, or what the family
names it). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from llmtop.model import EngineSample, Hist
from llmtop.model.stack import BackendSample, RouterSample
from llmtop.parse.common import build_hists, hist_family, sample_index
from llmtop.parse.exposition import Family, ParseError, Sample, parse

__all__ = ["Index", "by_label", "first_hist", "make_sample", "parse_router", "policy_of",
           "put_backend", "roles_from_counters", "total"]

Index = dict[str, list[Sample]]
"""``common.sample_index``: samples by name, ``_total`` removed."""


def parse_router(body: str, prefixes: Iterable[str], why: str) -> Index:
    """The sample index of a router's exposition text; a payload with none of the
    ``prefixes`` (a wrong hint, an engine) is a ParseError saying ``why``."""
    prefixes = tuple(prefixes)
    fams: dict[str, Family] = parse(body)
    if not any(n.startswith(prefixes) for n in fams):
        raise ParseError(f"no {'/'.join(p.rstrip('_:') + '_*' for p in prefixes)} metrics "
                         f"({why})")
    return sample_index(fams)


def _ok(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def by_label(index: Index, name: str, label: str = "worker",
             where: dict[str, str] | None = None) -> dict[str, float]:
    """Sum of the samples named ``name`` by the value of ``label`` (samples without it are
    skipped; NaN/Inf skipped: not reported)."""
    out: dict[str, float] = {}
    for s in index.get(name, ()):
        key = s.labels.get(label)
        if key is None or not _ok(s.value):
            continue
        if where and any(s.labels.get(k) != v for k, v in where.items()):
            continue
        out[key] = out.get(key, 0.0) + s.value
    return out


def total(index: Index, name: str, where: dict[str, str] | None = None) -> float | None:
    """Sum of every finite sample named ``name`` (None when there is none)."""
    vals = [s.value for s in index.get(name, ()) if _ok(s.value)
            and not (where and any(s.labels.get(k) != v for k, v in where.items()))]
    return sum(vals) if vals else None


def first_hist(index: Index, *names: str) -> Hist | None:
    """The first of ``names`` present as a histogram, all label sets summed."""
    for name in names:
        fam = hist_family(index, name)
        if fam is None:
            continue
        hists = build_hists(fam, ())
        if hists:
            return next(iter(hists.values()))
    return None


def policy_of(index: Index, name: str, label: str = "policy") -> str | None:
    """The policy with the most decisions in ``name`` (a counter labelled by policy)."""
    counts = by_label(index, name, label)
    return max(counts, key=lambda k: counts[k]) if counts else None


def put_backend(rs: RouterSample, url: str, *, role: str | None = None,
                **values: float) -> None:
    """Set ``values`` (``BackendSample`` fields) on the backend ``url`` of ``rs`` (created
    when new)."""
    url = url.strip()
    if not url:
        return
    b = rs.backends.get(url)
    if b is None:
        b = rs.backends[url] = BackendSample(url=url)
    for name, v in values.items():
        setattr(b, name, v)  # a name that is no field raises: declared names only
    if role is not None:
        b.role = role if b.role in (None, role) else "both"


def roles_from_counters(rs: RouterSample) -> None:
    """A backend with prefill-routed requests only is ``prefill``, decode only ``decode``,
    both ``both``; one with neither keeps what it had."""
    for b in rs.backends.values():
        p = b.prefill_routed is not None
        d = b.decode_routed is not None
        if p and d:
            b.role = "both"
        elif p:
            b.role = "prefill"
        elif d:
            b.role = "decode"


def make_sample(engine: str, rs: RouterSample, version: str | None = None) -> EngineSample:
    """The ``EngineSample`` of a router: no models, the ``RouterSample`` in ``extra``."""
    return EngineSample(engine=engine, version=version, extra={"router": rs})
