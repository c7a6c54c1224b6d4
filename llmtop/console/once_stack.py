"""``--once`` plain text of the serving stack: each router, its backends (as the router sees
them, beside their engine rows), its pools and its TTFT path. Missing numbers show ``–``."""

from __future__ import annotations

from llmtop.model import Snapshot
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.topology.pools import Pool
from llmtop.topology.stack import build_stack
from llmtop.units import DASH, pct

__all__ = ["stack_lines"]


def _n(v: float | None, fmt: str = "{:.1f}", unit: str = "") -> str:
    return DASH if v is None else fmt.format(v) + unit


def _yes(v: bool | None, yes: str, no: str) -> str:
    return DASH if v is None else (yes if v else no)


def _router_line(r: RouterRow) -> str:
    p95 = r.request_s.p95 if r.request_s is not None else None
    ttft = r.ttft_s.p95 if r.ttft_s is not None else None
    healthy = (f"{r.healthy_backends}/{r.total_backends}"
               if r.healthy_backends is not None and r.total_backends is not None else DASH)
    return (f"router {r.target} ({r.engine or DASH}, policy {r.policy or DASH}) {r.state}"
            f" · {_n(r.requests_per_s)} req/s · healthy {healthy}"
            f" · open breakers {_n(r.open_breakers, '{:.0f}')}"
            f" · retries {_n(r.retries_per_s, '{:.2f}')}/s"
            f" · request p95 {_n(p95, '{:.2f}', ' s')} · TTFT p95 {_n(ttft, '{:.2f}', ' s')}")


def _backend_line(b: BackendRow) -> str:
    return (f"  backend {b.url} → {b.target or 'not scraped'} · role {b.role or DASH}"
            f" · healthy {_yes(b.healthy, 'yes', 'NO')}"
            f" · breaker {_yes(b.breaker_open, 'OPEN', 'closed')}"
            f" · routed {pct(b.routed_share)} of requests, {pct(b.capacity_share)} of capacity"
            f" · {_n(b.requests_per_s)} req/s")


def _pool_line(p: Pool) -> str:
    running = (f"{_n(p.running, '{:.0f}')}/{_n(p.max_running, '{:.0f}')}")
    return (f"  pool {p.role}: {len(p.targets)} engines ({p.up} up) · waiting "
            f"{_n(p.waiting, '{:.0f}')} · running {running} · KV {pct(p.kv_usage)}"
            f" · queue {_n(p.queue_mean_s, '{:.2f}', ' s')}"
            f" · prefill {_n(p.prefill_mean_s, '{:.2f}', ' s')}"
            f" · ITL p95 {_n(p.itl_p95_s, '{:.3f}', ' s')}")


def stack_lines(snap: Snapshot) -> list[str]:
    """Plain lines for every router of ``snap`` ([] without routers)."""
    if not snap.routers:
        return []
    stack = build_stack(snap.engines, snap.routers)
    out: list[str] = []
    for r in stack.routers:
        out.append(_router_line(r))
        if r.error and r.state != "ok":
            out.append(f"  {r.error}")
        out += [_backend_line(b) for b in r.backends]
        out += [_pool_line(p) for p in stack.pools if p.router == r.target]
        path = stack.paths.get(r.target) or []
        if path:
            out.append("  TTFT path (means): " + " → ".join(
                f"{s.name.replace('_', ' ')} {s.seconds:.3f} s" for s in path))
    return out
