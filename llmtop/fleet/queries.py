"""PromQL that fleet mode sends: a fixed set of union queries per refresh, whatever the fleet size.

Every per-refresh query is an instant query at one aligned time ``t``:

* ``gauges``: ``sum by (KEEP) (max without (DUP) (X{F}))`` per gauge name;
* ``counters``: ``sum by (KEEP) (max without (DUP) (rate(X{F}[W])))`` per counter (and per
  histogram ``_sum``/``_count``): rate first, then the sum;
* ``buckets``: ``sum by (KEEP, le) (max without (DUP) (rate(X_bucket{F}[W])))``: quantiles
  are taken on the client, so one query serves every quantile and every rollup. When every
  series of ``X`` has the same bucket layout (``layout_query``, at connect), only buckets
  strictly between 0 and the ``_count`` rate are asked (``(B > 0) < ignoring (le)
  group_left () C``; ``> 0`` only when ``_sum`` is asked too): the rest are 0 below and the
  count above, and the client puts them back from the layout (``hists.direct_hists``; with
  none sent, the bucket holding the mean has them all), so the quantiles are the same while
  most answer series (the top and the empty buckets) are not sent;
* ``state``: inventory (``last_over_time`` of one gauge per engine), the newest sample time
  (``timestamp``), ``up`` and ``changes(process_start_time_seconds[W])``;
* ``gpus``: the DCGM exporter's gauges.

Each name's sub-expression is tagged with ``label_replace(..., "llmtop_name", NAME, "", "")``
and joined with ``or``: ``rate()`` and aggregations drop ``__name__``, the tag keeps the
answers apart. ``F`` always holds ``server=""`` (the vLLM production-stack router re-exports
engine names with a ``server`` label); ``DUP`` are the labels of copies that must be counted
once (HA replicas, SGLang tensor/pipeline ranks). Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from llmtop.topology.roles import ROLE_LABELS

__all__ = [
    "BARE_MATCHER",
    "BARE_PRESENCE",
    "BARE_TRTLLM",
    "BUCKET_PARTS",
    "DETAIL_HISTS",
    "DUP_LABELS",
    "ENGINE_LABELS",
    "MAX_QUERY_CHARS",
    "MODEL_LABELS",
    "POD_ROLE_LABELS",
    "PRESENCE",
    "ROUTER_NAMES",
    "RULE_LABELS",
    "Layouts",
    "Matcher",
    "Plan",
    "align",
    "classify",
    "describe_queries",
    "detail_only",
    "detail_only_names",
    "discovery_query",
    "engine_of",
    "jobs_query",
    "layout_query",
    "names_selectors",
    "parse_duration",
    "parse_match",
    "read_layouts",
    "rule_names",
    "selector",
    "split_union",
]

DUP_LABELS = ("prometheus_replica", "replica", "tp_rank", "pp_rank", "moe_ep_rank", "cp_rank")
"""Labels of copies of one value: HA Prometheus pairs, SGLang TP/PP/EP ranks (max over them)."""

MODEL_LABELS = ("model_name", "model", "name")
"""Labels that name the model (vLLM/SGLang/trtllm ``model_name``, Triton ``model``, SGLang<0.4
``name``)."""

ENGINE_LABELS = (*MODEL_LABELS, "version", "engine", "dp_rank", "finished_reason", "reason",
                 "request_type", "kv_cache_block_type", "engine_type", "method", "err",
                 "quantile", "gpu_uuid", "mode")
"""Labels the adapters in ``llmtop/parse`` read (model, rank, category): kept in every ``by``."""

PRESENCE = {
    "vllm": "vllm:num_requests_running",
    "sglang": "sglang:num_running_reqs",
    "lmdeploy": "lmdeploy:num_requests_running",
    "llamacpp": "llamacpp:requests_processing",
    "tgi": "tgi_queue_size",
    "trtllm": "trtllm_num_requests_running",
    "triton": "nv_inference_request_success",
}
"""One series per engine family that every instance exposes: the inventory is built from it."""

ROUTER_NAMES = "vllm_router_.+|smg_.+|sgl_router_.+"
"""The routers fleet mode reads: the vLLM router, SGLang's Model Gateway (both names)."""
POD_ROLE_LABELS = tuple(re.sub(r"[^a-zA-Z0-9_]", "_", k) for k in ROLE_LABELS)
"""``topology.roles.ROLE_LABELS`` as Prometheus' ``labelmap`` writes them on pods' series."""

_PREFIXES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("lmdeploy:", "lmdeploy"),
             ("llamacpp:", "llamacpp"), ("tgi_", "tgi"), ("trtllm_", "trtllm"),
             ("trtllm:", "trtllm"), ("nv_", "triton"), ("DCGM_FI_", "dcgm"))
_NAME_RE = "(vllm|sglang|lmdeploy|llamacpp|trtllm|llmtop):.+|" \
    "(tgi_|trtllm_|nv_inference_|nv_trt_llm_|nv_llm_|DCGM_FI_).+"
_BARE_HISTS = ("e2e_request_latency_seconds", "time_to_first_token_seconds",
               "time_per_output_token_seconds", "request_queue_time_seconds")
BARE_TRTLLM = frozenset(("request_success_total",
                         *(f"{h}_{s}" for h in _BARE_HISTS for s in ("bucket", "sum", "count"))))
"""TensorRT-LLM 1.1's unprefixed names (``METRICS.md`` §7): generic words, so they are
TRT-LLM's only on series with an ``engine_type`` label (``BARE_MATCHER``, in every selector
of theirs)."""
BARE_MATCHER = 'engine_type!=""'
BARE_PRESENCE = "time_to_first_token_seconds_count"
"""The presence series of a TRT-LLM 1.1 instance (its labelled histograms exist from the
start; ``request_success_total`` appears only with a first finished request)."""
_BARE_RE = "request_success_total|(" + "|".join(h[:-8] for h in _BARE_HISTS) + \
    ")_seconds_(bucket|sum|count)"
_SKIP_TRITON = ("nv_gpu_", "nv_cpu_", "nv_energy", "nv_pinned")
_TRITON_GAUGES = ("nv_inference_pending_request_count",)


@lru_cache(maxsize=4096)  # asked per name per group: a few hundred names, every refresh
def engine_of(name: str) -> str | None:
    """The engine family a metric name belongs to, by prefix (TRT-LLM 1.1's bare names by
    name: fleet mode only lists them from series with an ``engine_type`` label)."""
    if name in BARE_TRTLLM:
        return "trtllm"
    return next((e for prefix, e in _PREFIXES if name.startswith(prefix)), None)


DETAIL_HISTS = ("e2e", "decode", "inference", "gen_len", "iteration_tokens")
"""Histograms only the engine detail screen and JSON show (no table column and no diagnosis
rule reads them): a lean plan (the TUI's) asks them for the drilled-in row only."""


@lru_cache(maxsize=4096)
def detail_only(name: str) -> bool:
    """Whether ``name`` is a part of one of ``DETAIL_HISTS`` in its adapter's table: its
    buckets; and its ``_sum``/``_count`` for the adapters that take request counts from
    counters of their own (vLLM, SGLang, LMDeploy), whose rows then show no mean either."""
    import importlib

    engine = engine_of(name)
    if engine is None or engine == "dcgm":
        return False
    table = getattr(importlib.import_module(f"llmtop.parse.{engine}"), "HIST_FAMILIES", None)
    if table is None:
        return False
    for sfx in ("_bucket", "_sum", "_count"):
        if name.endswith(sfx):
            if sfx != "_bucket" and engine not in ("vllm", "sglang", "lmdeploy"):
                return False
            return any(name[: -len(sfx)] in table.get(k, ()) for k in DETAIL_HISTS)
    return False


def detail_only_names(names: Mapping[str, str]) -> frozenset[str]:
    """The buckets and counters of ``names`` (name -> kind) a lean plan leaves out."""
    return frozenset(n for n, k in names.items() if k in ("bucket", "counter")
                     and detail_only(n))


def parse_duration(text: str) -> float | None:
    """Prometheus duration (``15s``, ``1m30s``, ``500ms``) in seconds, None if unreadable."""
    total = 0.0
    found = False
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text or ""):
        found = True
        total += float(num) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400,
                               "w": 604800, "y": 31536000}[unit]
    return total if found else None


def align(t: float, step: float) -> float:
    """``t`` rounded down to a multiple of ``step`` (so caching frontends can reuse answers)."""
    step = max(1.0, step)
    return math.floor(t / step) * step


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher of ``--match`` (``label op "value"``)."""

    label: str
    op: str
    value: str

    def text(self) -> str:
        v = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{self.op}"{v}"'


_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_match(text: str | None) -> list[Matcher] | None:
    """``--match`` text (with or without braces) -> matchers; None when it cannot be read
    (it is then sent as written and the server's error is shown)."""
    if not text or not text.strip():
        return []
    s = text.strip()
    if s.startswith("{") and s.endswith("}"):
        s = s[1:-1]
    out: list[Matcher] = []
    pos = 0
    while pos < len(s):
        m = _MATCHER.match(s, pos)
        if m is None:
            return None
        out.append(Matcher(m.group(1), m.group(2),
                           re.sub(r"\\(.)", r"\1", m.group(3))))
        pos = m.end()
    return out


def selector(name: str | None, matchers: list[str]) -> str:
    """``name{m1,m2}`` (or ``{...}``)."""
    inner = ",".join(matchers)
    return f"{name or ''}{{{inner}}}"


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def _tag(expr: str, name: str) -> str:
    return f'label_replace({expr}, "llmtop_name", "{name}", "", "")'


def classify(name: str, types: Mapping[str, str] | Collection[str],
             bucket_bases: Collection[str] = ()) -> str:
    """``gauge`` | ``counter`` | ``bucket`` | ``info`` | ``skip`` for one present name.

    ``types``: name -> type from the server's metadata (a plain collection: names known to
    be counters); empty: the name decides (``_total``, Triton's counters without it)."""
    if name.endswith("_created") or name.startswith(_SKIP_TRITON):
        return "skip"
    known = types.get(name) if isinstance(types, Mapping) else (
        "counter" if name in types else None)
    if name.endswith("_info"):  # an info series' value is in its labels: kept whole
        return "info"
    if name in _TRITON_GAUGES or known in ("gauge", "summary"):
        return "gauge"
    if name.endswith("_bucket"):
        return "bucket"
    if name.endswith(("_sum", "_count")):
        return "counter"
    if name.endswith("_total") or known == "counter":
        return "counter"
    if name.startswith("nv_inference_") and known is None:
        return "counter"
    return "gauge"


def _presence_sels(matchers: list[str], *extra: str) -> list[str]:
    """Selectors of the presence series of every engine (TRT-LLM 1.1's with its matcher)."""
    pres = f'__name__=~"{"|".join(map(re.escape, PRESENCE.values()))}"'
    return [selector(None, [pres, *matchers, *extra]),
            selector(BARE_PRESENCE, [BARE_MATCHER, *matchers, *extra])]


def _counted(sels: list[str], matchers: list[str]) -> str:
    pods = " or ".join(_presence_sels(matchers, 'pod!=""'))
    names = " or ".join(f"count by (__name__, job) ({s})" for s in sels)
    return f"{names} or {_tag(f'count({pods})', 'has_pod')}"


def discovery_query(matchers: list[str]) -> str:
    """Once per connect: which engine metric names exist, by job, and whether series carry
    ``pod`` (for the default grouping)."""
    return _counted(names_selectors(matchers), matchers)


def names_selectors(matchers: list[str]) -> list[str]:
    """The ``match[]`` of the label-values request that lists the engine metric names (the
    server reads its index only: no sample is decoded): the prefixed names, and TRT-LLM
    1.1's bare names on series with ``engine_type``."""
    return [selector(None, [f'__name__=~"{_NAME_RE}"', *matchers]),
            selector(None, [f'__name__=~"{_BARE_RE}"', BARE_MATCHER, *matchers])]


def jobs_query(matchers: list[str]) -> str:
    """With the names from the label-values API: the jobs of the engines and whether their
    series carry ``pod``, from the one series per instance that every engine exposes."""
    return _counted(_presence_sels(matchers), matchers)


def layout_query(buckets: Collection[str], matchers: list[str]) -> str:
    """At connect: how many series each bucket name has per ``le`` (``read_layouts``)."""
    sel = selector(None, [f'__name__=~"{"|".join(sorted(buckets))}"', *matchers])
    return f"count by (__name__, le) ({sel})"


def read_layouts(result: list[dict[str, Any]]) -> dict[str, tuple[float, ...]]:
    """``layout_query``'s answer -> bucket name -> its bounds (``+Inf`` last), for the names
    whose every series has every bound (each ``le`` counted as often as ``+Inf``); a name
    with mixed layouts (two engine versions) is left out and asked unfiltered."""
    counts: dict[str, dict[float, float]] = {}
    for item in result:
        metric = item.get("metric") or {}
        name, value = metric.get("__name__"), item.get("value")
        try:
            le = float(metric.get("le", ""))
            n = float(value[1]) if isinstance(value, list) and len(value) == 2 else math.nan
        except (TypeError, ValueError):
            continue
        if name and le == le and n > 0:
            per = counts.setdefault(name, {})
            per[le] = per.get(le, 0.0) + n
    out: dict[str, tuple[float, ...]] = {}
    for name, per in counts.items():
        if math.inf in per and len(set(per.values())) == 1:
            out[name] = tuple(sorted(per))
    return out


class Layouts(dict[str, tuple[float, ...]]):
    """``Plan.layouts`` (bucket name -> bounds) as the row builder reads them; ``stale``
    collects the names an answer showed a bound of that the layout lacks (a new engine
    version since connect): the monitor then asks the layouts again."""

    def __init__(self, *args: Any) -> None:  # a mapping, pairs, or nothing
        super().__init__(*args)
        self.stale: set[str] = set()
        self._sets: dict[str, frozenset[float]] = {}

    def bounds(self, base: str) -> frozenset[float]:
        """The layout of ``base + "_bucket"`` as a set."""
        got = self._sets.get(base)
        if got is None:
            got = self._sets[base] = frozenset(self.get(base + "_bucket", ()))
        return got


@dataclass(slots=True)
class Plan:
    """Everything the per-refresh queries depend on, fixed at connect time."""

    group: tuple[str, ...]
    """Row labels (without the model label: the adapters find it)."""
    window_s: float
    matchers: list[str]
    """``F``: the user's matchers plus ``server=""``."""
    target_matchers: list[str]
    """``F`` without matchers on engine labels: for ``up`` and process series."""
    names: dict[str, str] = field(default_factory=dict)
    """Present name -> kind (``classify``)."""
    engines: tuple[str, ...] = ()
    lookback_s: float = 600.0
    """How far back the inventory looks for instances that went away."""
    rules: dict[str, str] = field(default_factory=dict)
    """Raw name -> ``llmtop:*`` recording rule holding its rate over this window."""
    layouts: Layouts = field(default_factory=Layouts)
    """Bucket name -> the bounds every one of its series has (``read_layouts``): only
    these names are asked with the ``< _count`` filter (a plain dict given is wrapped)."""
    bucket_parts: int = 1
    """The bucket union is sent as at least this many queries of like length (the fleet's
    plan: ``BUCKET_PARTS``; a one-row plan: 1)."""
    detail_only: frozenset[str] = frozenset()
    """Names (buckets, and their ``_sum``/``_count``) left out of the per-refresh queries
    (``FleetMonitor.lean``): the detail screen asks them for its one row."""

    def __post_init__(self) -> None:
        if not isinstance(self.layouts, Layouts):
            self.layouts = Layouts(self.layouts)

    @property
    def keep(self) -> tuple[str, ...]:
        seen: dict[str, None] = dict.fromkeys((*self.group, "job", *ENGINE_LABELS))
        return tuple(seen)

    @property
    def target_keep(self) -> tuple[str, ...]:
        seen = dict.fromkeys(g for g in (*self.group, "job", "instance")
                             if g not in ENGINE_LABELS)
        return tuple(seen)

    @property
    def inventory_keep(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.target_keep, *self.group, *MODEL_LABELS)))

    def _w(self) -> str:
        return f"{max(1, round(self.window_s))}s"

    def _dedup(self, expr: str) -> str:
        return f"max without ({_by(DUP_LABELS)}) ({expr})"

    def _sel(self, name: str) -> str:
        if name in BARE_TRTLLM:
            return selector(name, [*self.matchers, BARE_MATCHER])
        return selector(name, self.matchers)

    def gauges(self) -> str | None:
        keep = _by(self.keep)
        parts = []
        for name, kind in sorted(self.names.items()):
            if kind == "gauge":
                parts.append(_tag(f"sum by ({keep}) ({self._dedup(self._sel(name))})", name))
            elif kind == "info":
                parts.append(_tag(self._dedup(self._sel(name)), name))
        return " or ".join(parts) or None

    def _sum_rate(self, name: str, keep: str) -> str:
        rule = self.rules.get(name)
        if rule is not None:  # recorded by examples/llmtop-rules.yaml: same shape, precomputed
            return f"sum by ({keep}) ({self._sel(rule)})"
        return f"sum by ({keep}) ({self._dedup(f'rate({self._sel(name)}[{self._w()}])')})"

    def _rate(self, name: str, keep: str) -> str:
        return _tag(self._sum_rate(name, keep), name)

    def filtered(self, name: str) -> bool:
        """Whether bucket ``name`` is asked only below its count (see the module doc): its
        layout is uniform and its ``_count`` comes from the same source (raw or rule)."""
        count = name[:-7] + "_count"
        return (name in self.layouts and self.names.get(count) == "counter"
                and (name in self.rules) == (count in self.rules))

    def zero_cut(self, name: str) -> bool:
        """Whether filtered bucket ``name`` leaves out its zero buckets too: its ``_sum``
        comes in each refresh from the same source, so a histogram with no bucket sent (all
        in one bucket) is placed by its mean (``hists._filled``)."""
        total = name[:-7] + "_sum"
        return (self.filtered(name) and self.names.get(total) == "counter"
                and total not in self.detail_only
                and (name in self.rules) == (total in self.rules))

    def _bucket(self, name: str) -> str:
        keep = _by(self.keep)
        b = self._sum_rate(name, f"{keep}, le")
        if not self.filtered(name):
            return _tag(b, name)
        c = self._sum_rate(name[:-7] + "_count", keep)
        if self.zero_cut(name):
            b = f"({b} > 0)"
        return _tag(f"{b} < ignoring (le) group_left () {c}", name)

    def counters(self) -> str | None:
        keep = _by(self.keep)
        parts = [self._rate(n, keep) for n, kind in sorted(self.names.items())
                 if kind == "counter" and n not in self.detail_only]
        return " or ".join(parts) or None

    def buckets(self) -> str | None:
        parts = [self._bucket(n) for n, kind in sorted(self.names.items())
                 if kind == "bucket" and n not in self.detail_only]
        return " or ".join(parts) or None

    def _presence(self) -> list[tuple[str, str]]:
        out = [(e, PRESENCE[e]) for e in self.engines if PRESENCE.get(e) in self.names]
        if "trtllm" in self.engines and not any(e == "trtllm" for e, _ in out) \
                and BARE_PRESENCE in self.names:  # TRT-LLM 1.1: bare names only
            out.append(("trtllm", BARE_PRESENCE))
        return out

    def state(self) -> str | None:
        pres = self._presence()
        if not pres:
            return None
        inv, tk = _by(self.inventory_keep), _by(self.target_keep)
        look = f"{max(1, round(self.lookback_s))}s"
        parts: list[str] = []
        seen = []
        for engine, name in pres:
            parts.append(_tag(f"group by ({inv}) (last_over_time({self._sel(name)}[{look}]))",
                              f"inventory:{engine}"))
            parts.append(_tag(f"max by ({inv}) (timestamp({self._sel(name)}))",
                              f"last_ts:{engine}"))
            seen.append(f"last_over_time({self._sel(name)}[{look}])")
        known = f"group by (job, instance) ({' or '.join(seen)})"
        up = selector("up", self.target_matchers)
        jobs = f"group by (job) ({' or '.join(seen)})"
        parts.append(_tag(f"max by ({tk}) ({up}) and on (job) {jobs}", "up"))
        pst = selector("process_start_time_seconds", self.target_matchers)
        w = self._w()  # not changes(): VictoriaMetrics counts a series' first sample as one
        parts.append(_tag(f"max by ({tk}) (max_over_time({pst}[{w}]) - min_over_time({pst}[{w}]))"
                          f" and on (job, instance) {known}", "restarts"))
        return " or ".join(parts)

    def gpus(self) -> str | None:
        parts = [_tag(f"max without ({_by(DUP_LABELS)}) ({selector(n, [])})", n)
                 for n, kind in sorted(self.names.items()) if kind == "dcgm"]
        return " or ".join(parts) or None

    def stack(self) -> str:
        """One query (read by ``fleet/stack.py``): the routers' series now, the
        same ``W`` earlier (``llmtop_base="1"``) and one series per engine instance with its
        group, ``instance``, ``pod`` and role labels (tagged: backends link by them)."""
        now = selector(None, [f'__name__=~"{ROUTER_NAMES}"', *self.target_matchers])
        out = f'{now} or label_replace({now} offset {self._w()}, "llmtop_base", "1", "", "")'
        present = [selector(PRESENCE[e], self.matchers) for e in self.engines if e in PRESENCE]
        keep = _by(tuple(dict.fromkeys((*self.group, "job", "instance", "pod",
                                        *POD_ROLE_LABELS))))
        if present:
            out += " or " + _tag(f"group by ({keep}) ({' or '.join(present)})", "llmtop_roles")
        return out

    def queries(self) -> dict[str, str]:
        """The per-refresh queries by role (a fixed set, whatever the fleet size): ``ROLE`` or
        ``ROLE#N`` when a union is split to stay under ``MAX_QUERY_CHARS``."""
        out: dict[str, str] = {}
        # the slowest first: at most MAX_CONCURRENT run at once, in this order
        for role, expr in (("buckets", self.buckets()), ("counters", self.counters()),
                           ("gauges", self.gauges()), ("state", self.state()),
                           ("gpus", self.gpus()), ("stack", self.stack())):
            if not expr:
                continue
            # the buckets are most of a refresh's server time: at least BUCKET_PARTS queries
            # of like length, so a server with spare cores evaluates them side by side
            chunks = split_union(expr, at_least=self.bucket_parts if role == "buckets" else 1)
            for i, chunk in enumerate(chunks):
                out[role if len(chunks) == 1 else f"{role}#{i}"] = chunk
        return out


MAX_QUERY_CHARS = 12_000
"""VictoriaMetrics refuses queries over 16 KiB (``-search.maxQueryLen``): unions are split."""
BUCKET_PARTS = 2
"""The fleet's bucket union is split into at least this many queries (when it has that many
names): a server with spare cores evaluates them side by side."""


def split_union(expr: str, limit: int = MAX_QUERY_CHARS, at_least: int = 1) -> list[str]:
    """A union ``a or b or ...`` of tagged parts cut into unions of at most ``limit`` chars,
    and into at least ``at_least`` of like length when it has that many parts (a cut only
    ever falls between ``label_replace(...)`` parts)."""
    if len(expr) <= limit and at_least <= 1:
        return [expr]
    parts = expr.split(" or label_replace(")
    parts = [parts[0]] + ["label_replace(" + p for p in parts[1:]]
    n = max(at_least, -(-len(expr) // limit))
    while True:
        out: list[str] = []
        cur = ""
        for p in parts:
            if cur and (len(cur) + 4 + len(p) > limit
                        or (len(cur) >= len(expr) / n and len(out) < n - 1)):
                out.append(cur)
                cur = p
            else:
                cur = f"{cur} or {p}" if cur else p
        if cur:
            out.append(cur)
        if len(out) <= n or n >= len(parts):
            return out
        n += 1


def describe_queries() -> str:
    """Every query fleet mode sends, for one vLLM gauge, counter, histogram and DCGM field
    (``docs/fleet.md`` shows this text; a test keeps the two the same)."""
    p = Plan(group=("instance",), window_s=60.0, matchers=['server=""'], target_matchers=[],
             names={"vllm:num_requests_running": "gauge", "vllm:cache_config_info": "info",
                    "vllm:generation_tokens_total": "counter",
                    "vllm:time_to_first_token_seconds_bucket": "bucket",
                    "vllm:time_to_first_token_seconds_count": "counter",
                    "vllm:time_to_first_token_seconds_sum": "counter",
                    "DCGM_FI_DEV_GPU_UTIL": "dcgm"}, engines=("vllm",),
             layouts={"vllm:time_to_first_token_seconds_bucket": (0.1, 1.0, math.inf)})
    out = ["# once per connect (and every 5 minutes): which engine metric names exist, from",
           "# GET /api/v1/label/__name__/values?match[]=S1&match[]=S2&start=t-300&end=t (the",
           "# index only), with S1 and S2 (TRT-LLM 1.1's bare names, with engine_type):",
           *names_selectors(['server=""']),
           "# and the engines' jobs and pods, from one series per instance:",
           jobs_query(['server=""']),
           "# (a server without that API: one query that counts every engine series instead)",
           discovery_query(['server=""']),
           "# and the bucket layouts (a name whose series all have the same bounds is then",
           "# asked only strictly between 0 and its _count, below):",
           layout_query(["vllm:time_to_first_token_seconds_bucket"], ['server=""']), ""]
    for role, q in p.queries().items():
        out.append(f"# per refresh: {role}")
        out.append(q.replace(" or label_replace", "\n  or label_replace"))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


RULE_LABELS = frozenset(("namespace", "pod", "instance", "job", "model_name", "model", "engine",
                         "dp_rank", "le", "finished_reason", "server"))
"""Labels the series of ``examples/llmtop-rules.yaml`` keep: rules serve a plan only when its
group and the user's matchers use no other label."""

_RULE = re.compile(r"^llmtop:(.+):rate(\w+)$")


def rule_names(present: Collection[str], names: Collection[str], window_s: float,
               labels_used: Collection[str]) -> dict[str, str]:
    """Raw name -> recording rule ``llmtop:<name, ':' as '_'>:rate<window>`` for the rules
    present with exactly this window; {} when the plan needs a label the rules dropped."""
    if not set(labels_used) <= RULE_LABELS:
        return {}
    by_flat: dict[str, str] = {}
    for rule in present:
        m = _RULE.match(rule)
        if m and parse_duration(m.group(2)) == window_s:
            by_flat[m.group(1)] = rule
    return {n: by_flat[n.replace(":", "_")] for n in names
            if n.replace(":", "_") in by_flat}
