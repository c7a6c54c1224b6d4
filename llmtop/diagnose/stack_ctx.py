"""What the serving-stack rules see: the topology of the rows (``topology.build_stack``),
the window, and the smallest ``waiting`` of each row over it. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llmtop.diagnose.context import window_label
from llmtop.diagnose.findings import Evidence, Finding
from llmtop.model import EngineRow
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.stack import Stack, build_stack

__all__ = ["StackCtx", "stack_ctx"]


@dataclass(slots=True)
class StackCtx:
    """The inputs of the stack rules (``rules/routing.py``, ``pd.py``, ``kv_transfer.py``)."""

    stack: Stack
    window_s: float
    rows: dict[str, EngineRow] = field(default_factory=dict)
    """Engine rows by target (rank rows left out), any state."""
    waiting_min: Mapping[str, float] = field(default_factory=dict)

    @property
    def window(self) -> str:
        return window_label(self.window_s)

    def row(self, target: str | None) -> EngineRow | None:
        return self.rows.get(target) if target is not None else None

    def waiting_all(self, row: EngineRow) -> float | None:
        """Waiting all window long: the smallest over the window when known, else now."""
        w = self.waiting_min.get(row.key)
        return w if w is not None else row.waiting

    def ev(self, signal: str, value: float | str | None, threshold: float | str | None = None,
           now: bool = False) -> Evidence:
        return Evidence(signal, value, "now" if now else self.window, None, threshold)

    @staticmethod
    def on_backend(b: BackendRow, row: EngineRow | None, rule: str, severity: str,
                   summary: str, evidence: Sequence[Evidence], action: str) -> Finding:
        """A finding named on a router's backend: its engine row (target and model), else
        its URL."""
        target = row.target if row is not None else (b.target or b.url)
        return Finding(rule, severity, target, row.model if row is not None else None,
                       summary, tuple(evidence), action)

    @staticmethod
    def on_router(router: RouterRow, rule: str, severity: str, summary: str,
                  evidence: Sequence[Evidence], action: str) -> Finding:
        """A finding named on the router's target (model None)."""
        return Finding(rule, severity, router.target, None, summary, tuple(evidence), action)


def stack_ctx(rows: Sequence[EngineRow], routers: Sequence[RouterRow], window_s: float,
              waiting_min: Mapping[str, float] | None = None) -> StackCtx:
    """The context of one diagnosis run (rows already linked by the store)."""
    top = [r for r in rows if r.rank is None]
    return StackCtx(stack=build_stack(top, routers), window_s=window_s,
                    rows={r.target: r for r in top}, waiting_min=waiting_min or {})
