"""The whole stack of one snapshot: routers with their pools and TTFT paths (groups out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llmtop.model import EngineRow
from llmtop.model.stack import RouterRow
from llmtop.topology.path import Stage, ttft_path
from llmtop.topology.pools import Pool, build_pools

__all__ = ["Stack", "build_stack"]


@dataclass(slots=True)
class Stack:
    """Routers, the engine rows behind each, pools and TTFT paths of one snapshot."""

    routers: list[RouterRow] = field(default_factory=list)
    backends: dict[str, list[EngineRow]] = field(default_factory=dict)
    """Router target -> its backends' engine rows."""
    pools: list[Pool] = field(default_factory=list)
    paths: dict[str, list[Stage]] = field(default_factory=dict)
    """Router target -> its TTFT path stages."""

    def pools_of(self, router: str) -> dict[str, Pool]:
        """A router's pools by role."""
        return {p.role: p for p in self.pools if p.router == router}


def build_stack(engines: Sequence[EngineRow], routers: Sequence[RouterRow]) -> Stack:
    """Group linked rows (``link.link_stack`` ran in the store) by router."""
    out = Stack(routers=list(routers), pools=build_pools(engines))
    for r in routers:
        out.backends[r.target] = [e for e in engines if e.router == r.target and e.rank is None]
        out.paths[r.target] = ttft_path(r, engines)
    return out
