"""What one rule sees of one engine row: the row, its baseline, its GPUs and its siblings,
plus the small formatting helpers every summary uses. Pure.

- ``fmt_s``, ``fmt_pct`` and ``fmt_tok`` are ``llmtop/units.py``'s sentence style
  (``85 ms``, ``62 %``, ``812 tokens``), ``window_label`` its window (``30s``, ``5m``),
  under the rules' names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from llmtop.diagnose.baseline import Baseline, gpu_key
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.diagnose.signals import signal
from llmtop.model import EngineRow, GpuRecord
from llmtop.model.logs import LogEvent
from llmtop.model.request_records import RequestRecord
from llmtop.units import pct_words as fmt_pct
from llmtop.units import secs_words as fmt_s
from llmtop.units import tokens_words as fmt_tok
from llmtop.units import window as window_label

GAUGES = frozenset({"kv", "waiting", "running", "waiting_deferred"})
"""Signals read from the newest sample (evidence window ``now``), not over the window."""

_SIGNAL = object()
"""``RowCtx.ev``'s default: read the value from the row."""

__all__ = ["GAUGES", "RowCtx", "fmt_pct", "fmt_s", "fmt_tok", "fmt_x", "window_label"]


def fmt_x(v: float, base: float | None, unit: Callable[[float], str] | None = None) -> str:
    """`` (×3.1 its usual 85 ms)`` (``unit`` formats the baseline), or empty when there is
    no usable baseline."""
    if base is None or base <= 0:
        return ""
    shown = unit(base) if unit is not None else (f"{base:.2g}" if base < 10 else f"{base:.0f}")
    return f" (\u00d7{v / base:.1f} its usual {shown})"


@dataclass(slots=True)
class RowCtx:
    """The inputs of the rules for one row (see ``diagnose.engine.diagnose``)."""

    row: EngineRow
    base: Baseline | None
    window_s: float
    waiting_min: float | None = None
    """The smallest ``waiting`` seen over the window (None: unknown)."""
    gpus: Sequence[GpuRecord] = ()
    """GPUs holding this engine's memory (attribution)."""
    gpu_base: Mapping[str, Baseline] = field(default_factory=dict)
    siblings: Sequence[EngineRow] = ()
    """Other replicas of the same model (other targets), good state only."""
    restarted_ago_s: float | None = None
    """Seconds since llmtop saw this engine restart (None: not seen)."""
    requests: Sequence[RequestRecord] = ()
    """This row's single requests that ended in the window, from the engines' spans
    (``diagnose.request_citations``); empty without spans."""
    log_events: Sequence[LogEvent] = ()
    """The engine's log events in the diagnosis window, oldest first
    (``diagnose.log_citations``); empty when no log is followed."""

    @property
    def window(self) -> str:
        return window_label(self.window_s)

    def sig(self, name: str) -> float | None:
        return signal(self.row, name)

    def usual(self, name: str) -> float | None:
        return self.base.get(name) if self.base is not None else None

    def ev(self, name: str, threshold: float | str | None = None,
           value: float | str | object | None = _SIGNAL, *, baseline: bool = True
           ) -> Evidence:
        """Evidence of one signal (its value read from the row unless given)."""
        v = self.sig(name) if value is _SIGNAL else value
        assert v is None or isinstance(v, (int, float, str))
        window = "now" if name in GAUGES else self.window
        return Evidence(name, v, window, self.usual(name) if baseline else None, threshold)

    def gpu_usual(self, g: GpuRecord, name: str) -> float | None:
        b = self.gpu_base.get(gpu_key(g))
        return b.get(name) if b is not None else None

    def finding(self, rule: str, severity: str, summary: str, evidence: Sequence[Evidence],
                action: str) -> Finding:
        return Finding(rule, severity, self.row.target, self.row.model, summary,
                       tuple(evidence), action)
