"""The exporter's state between refreshes: the latest view, served by a ``Collector``.

The refresh loop (the event loop's thread) calls ``observe`` with each raw scrape (as a
``Monitor`` sink, beside the recorder) and ``update`` after each refresh; the HTTP server's
thread calls ``collect``. ``update`` swaps in a new ``View`` whole, so a scrape of
``/metrics`` always reads one refresh, never half of two.

A finding's ``summary`` label is its sentence as it was when it reached its severity (kept
until it ends or changes severity), so the series and an alert built on it keep one identity
for the episode; the numbers of the moment are ``llmtop_finding_value`` & co.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from llmtop import __version__
from llmtop.diagnose.findings import Finding
from llmtop.export.view import Health, View, build
from llmtop.model import SCRAPE_METRICS, RawScrape, Snapshot

__all__ = ["ExportState"]


class ExportState(Collector):
    """The latest refresh as a ``prometheus_client`` collector (see the module doc)."""

    def __init__(self, mode: str = "direct", *, diag_window_s: float | None = None,
                 process_metrics: bool = True) -> None:
        self.mode = mode
        self.diag_window_s = diag_window_s
        self.health = Health()
        self._summaries: dict[tuple[str, str, str | None, str], str] = {}
        self._known: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        self._view = View(__version__, mode, None, diag_window_s=diag_window_s)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        if process_metrics:  # the exporter's own CPU and memory: process_* series
            self.registry.register(ProcessCollector(registry=None))

    # -- the refresh loop's side --------------------------------------------------------
    def observe(self, item: Any) -> None:
        """A ``Monitor`` sink: count each metrics scrape, its errors and its duration; side
        polls (``/slots``, ``/workers``, health: ``RawScrape.kind``) are not scrapes."""
        if not isinstance(item, RawScrape) or item.kind != SCRAPE_METRICS:
            return
        h = self.health
        h.scrapes[item.target] = h.scrapes.get(item.target, 0) + 1
        if item.status != "ok":
            key = (item.target, item.status)
            h.scrape_errors[key] = h.scrape_errors.get(key, 0) + 1
        if item.elapsed_s is not None:
            h.scrape_s[item.target] = item.elapsed_s

    def update(self, snap: Snapshot | None, findings: Sequence[Finding], *,
               refresh_s: float | None = None, failed: bool = False) -> None:
        """Serve ``snap`` and ``findings`` from now on."""
        h = self.health
        h.refreshes += 1
        h.refresh_errors += 1 if failed else 0
        h.refresh_s = refresh_s
        live = {(f.rule, f.target, f.model, f.severity): f.summary for f in findings}
        self._summaries = {k: self._summaries.get(k, s) for k, s in live.items()}
        if snap is not None:
            self._remember(snap.engines)
        self._view = View(
            __version__, self.mode, snap, list(findings), dict(self._summaries),
            dict(self._known),
            Health(h.refreshes, h.refresh_errors, h.refresh_s, dict(h.scrapes),
                   dict(h.scrape_errors), dict(h.scrape_s)),
            self.diag_window_s)

    def _remember(self, rows: Iterable[Any]) -> None:
        seen: dict[str, tuple[str | None, list[str]]] = {}
        for r in rows:
            if r.model is not None:
                seen.setdefault(r.target, (r.engine, []))[1].append(r.model)
        for target, (engine, models) in seen.items():
            self._known[target] = (engine, tuple(models))

    # -- the HTTP side ------------------------------------------------------------------
    def collect(self) -> Iterable[Metric]:
        return build(self._view)

    def render(self) -> bytes:
        """One ``/metrics`` answer (Prometheus text format 0.0.4)."""
        return generate_latest(self.registry)
