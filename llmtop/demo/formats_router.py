"""The vLLM router's (``vllm-router`` 0.1.17) ``/metrics`` for the simulated router.

Names, types, label names and their order, bucket bounds and layout are those of the real
router's output captured on this machine (``tests/fixtures/routers/vllm-router-*.txt``): the
Rust exporter writes ``# TYPE`` lines only (no HELP, no ``_created``), a blank line after each
family, whole numbers without a decimal point, and a family only once it has a sample (the
retry and breaker-transition families appear with the first retry / transition).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from llmtop.demo.stats import Hist

__all__ = ["CONTENT_TYPE", "DURATION_BOUNDS", "QUANTILES", "RouterMetrics", "render"]

CONTENT_TYPE = "text/plain; charset=utf-8"
DURATION_BOUNDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0,
                   30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0)
"""Buckets of every ``vllm_router_*_seconds`` histogram."""
QUANTILES = (0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
_SUMMARY_KEEP = 1024
"""Observations a summary's quantiles are taken over (the newest)."""

Labels = tuple[tuple[str, str], ...]


def _num(v: float) -> str:
    if v == float("inf"):
        return "+Inf"
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _labels(labels: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in labels)
    return "{" + body + "}" if body else ""


class _Summary:
    def __init__(self) -> None:
        self.recent: deque[float] = deque(maxlen=_SUMMARY_KEEP)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.recent.append(v)
        self.sum += v
        self.count += 1

    def quantile(self, q: float) -> float:
        xs = sorted(self.recent)
        if not xs:
            return 0.0
        return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


class RouterMetrics:
    """The router's counters, gauges, histograms and summaries, keyed by family name and
    labels (kept in the order given, as the real router writes them)."""

    def __init__(self) -> None:
        self.types: dict[str, str] = {}
        self.values: dict[str, dict[Labels, float]] = {}
        self.hists: dict[str, dict[Labels, Hist]] = {}
        self.summaries: dict[str, _Summary] = {}

    def inc(self, name: str, labels: Labels = (), v: float = 1.0) -> None:
        self.types.setdefault(name, "counter")
        fam = self.values.setdefault(name, {})
        fam[labels] = fam.get(labels, 0.0) + v

    def set(self, name: str, labels: Labels, v: float) -> None:
        self.types.setdefault(name, "gauge")
        self.values.setdefault(name, {})[labels] = v

    def observe(self, name: str, labels: Labels, v: float) -> None:
        self.types.setdefault(name, "histogram")
        fam = self.hists.setdefault(name, {})
        h = fam.get(labels)
        if h is None:
            h = fam[labels] = Hist(DURATION_BOUNDS)
        h.observe(v)

    def observe_summary(self, name: str, v: float) -> None:
        self.types.setdefault(name, "summary")
        self.summaries.setdefault(name, _Summary()).observe(v)

    def value(self, name: str, labels: Labels = ()) -> float:
        return self.values.get(name, {}).get(labels, 0.0)


def render(m: RouterMetrics) -> bytes:
    """``/metrics`` text, families in the order they were first used."""
    out: list[str] = []
    for name, typ in m.types.items():
        out.append(f"# TYPE {name} {typ}")
        if typ in ("counter", "gauge"):
            for labels, v in m.values.get(name, {}).items():
                out.append(f"{name}{_labels(labels)} {_num(v)}")
        elif typ == "histogram":
            for labels, h in m.hists.get(name, {}).items():
                for b, c in zip((*h.bounds, float("inf")), h.cumulative(), strict=True):
                    out.append(f"{name}_bucket{_labels((*labels, ('le', _num(b))))} {_num(c)}")
                out.append(f"{name}_sum{_labels(labels)} {_num(h.sum)}")
                out.append(f"{name}_count{_labels(labels)} {_num(h.count)}")
        else:
            s = m.summaries[name]
            for q in QUANTILES:
                out.append(f'{name}{{quantile="{_num(q)}"}} {_num(s.quantile(q))}')
            out.append(f"{name}_sum {_num(s.sum)}")
            out.append(f"{name}_count {_num(s.count)}")
        out.append("")
    return ("\n".join(out) + "\n").encode() if out else b""
