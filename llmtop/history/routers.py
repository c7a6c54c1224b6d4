"""Router history: ``RouterRow`` of each router target over a window, its backends' URLs and
roles.

- ``router_row``: one row from its kept ``RouterSample``s.
- ``RouterBook``: what the store keeps of routers beside their samples (the roles from
  ``/workers``), their rows, and the backend URLs they name (for rediscovery).

Rates come from counter deltas over the window (restart-aware, ``derive.counter_rate``),
latencies from bucket deltas (``derive.hist_delta``); health, breakers and pending are the
newest sample's gauges. A backend the router stopped naming is dropped with its sample.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from llmtop.history.derive import counter_rate, hist_delta, hist_quantiles
from llmtop.history.rows import Entry
from llmtop.history.target import TargetHistory
from llmtop.model import Hist, Quantiles
from llmtop.model.stack import ROUTERS, BackendRow, BackendSample, RouterRow, RouterSample

__all__ = ["BREAKER_OPEN", "RouterBook", "is_router", "router_of", "router_row"]

BREAKER_OPEN = 1.0
"""``cb_state`` value of an open breaker (0 closed, 1 open, 2 half open: vllm-router and SMG
``metrics.rs``). Half open lets trial requests through: not counted as open."""

Routed = Callable[[BackendSample], "float | None"]


def _routed(b: BackendSample) -> float | None:
    return b.routed


def _prefill_routed(b: BackendSample) -> float | None:
    return b.prefill_routed


def _decode_routed(b: BackendSample) -> float | None:
    return b.decode_routed


_ROUTED: dict[str, Routed] = {"prefill": _prefill_routed, "decode": _decode_routed}
"""The routed-requests counter that counts a backend of each P/D role."""


def router_of(entry: Entry) -> RouterSample | None:
    """The ``RouterSample`` an entry's sample carries, if any."""
    rs = entry.sample.extra.get("router") if entry.sample.extra else None
    return rs if isinstance(rs, RouterSample) else None


def _rate(points: list[tuple[float, float]]) -> float | None:
    return counter_rate(points) if len(points) >= 2 else None


def _points(pairs: Sequence[tuple[float, RouterSample]],
            get: Callable[[RouterSample], float | None]) -> list[tuple[float, float]]:
    out = []
    for t, rs in pairs:
        v = get(rs)
        if v is not None:
            out.append((t, v))
    return out


def _quantiles(pairs: Sequence[tuple[float, RouterSample]],
               get: Callable[[RouterSample], Hist | None]) -> Quantiles | None:
    pts = [(t, h) for t, rs in pairs if (h := get(rs)) is not None]
    if not pts:
        return None
    d = hist_delta(pts)
    return None if d is None else hist_quantiles(d.bounds, d.cumulative, d.sum, d.count)


def router_row(row: RouterRow, window: Sequence[Entry],
               roles: dict[str, str] | None = None) -> RouterRow:
    """Fill ``row`` (target and state already set) from the window's entries. ``roles``:
    backend URL -> role from the router's HTTP API, for backends its metrics give none."""
    pairs = [(e.t_mono, rs) for e in window if (rs := router_of(e)) is not None]
    if not pairs:
        return row
    last = pairs[-1][1]
    row.policy = last.policy
    row.requests_per_s = _rate(_points(pairs, lambda rs: rs.requests))
    if row.requests_per_s is None and last.requests is None:
        row.requests_per_s = last.qps  # the router's own QPS gauge
    row.retries_per_s = _rate(_points(pairs, lambda rs: rs.retries))
    row.errors_per_s = _rate(_points(pairs, lambda rs: rs.errors))
    row.request_s = _quantiles(pairs, lambda rs: rs.request)
    row.ttft_s = _quantiles(pairs, lambda rs: rs.ttft)
    row.decode_pending_s = _quantiles(pairs, lambda rs: rs.decode_pending)
    row.decode_pending_p95_router_window_s = last.decode_pending_p95_router_window_s
    backends: list[BackendRow] = []
    for url, b in last.backends.items():
        get = _ROUTED.get(b.role or "", _routed)
        if get(b) is None and b.routed is not None:
            get = _routed
        rate = _rate(_points(pairs, lambda rs, u=url, g=get: (
            g(rs.backends[u]) if u in rs.backends else None)))
        if rate is None and get(b) is None:
            rate = b.qps
        h, cb = b.healthy, b.breaker
        pending = b.pending if b.pending is not None else b.active
        backends.append(BackendRow(
            url=url, role=b.role or (roles or {}).get(url), requests_per_s=rate, pending=pending,
            healthy=None if h is None else h >= 0.5,
            breaker_open=None if cb is None else cb == BREAKER_OPEN))
    _shares(backends)
    row.backends = backends
    known = [b for b in backends if b.healthy is not None]
    row.total_backends = len(backends) if backends else None
    row.healthy_backends = sum(1 for b in known if b.healthy) if known else None
    ready = last.ready_backends
    if row.healthy_backends is None and ready is not None:  # an EPP counts ready pods
        row.healthy_backends = int(ready)
    breakers = [b for b in backends if b.breaker_open is not None]
    row.open_breakers = sum(1 for b in breakers if b.breaker_open) if breakers else None
    return row


def _shares(backends: list[BackendRow]) -> None:
    """Each backend's share of the requests routed to its role's pool in the window."""
    for role in {b.role for b in backends}:
        group = [b for b in backends if b.role == role]
        rates = [b.requests_per_s for b in group if b.requests_per_s is not None]
        whole = sum(rates)
        if whole <= 0:
            continue
        for b in group:
            if b.requests_per_s is not None:
                b.routed_share = b.requests_per_s / whole


def is_router(ts: TargetHistory) -> bool:
    """True for a target detected (or hinted) as a router: it gets a ``RouterRow``."""
    return ts.engine in ROUTERS


class RouterBook:
    """The routers' side of the store: roles per backend, rows, backend URLs."""

    def __init__(self) -> None:
        self.roles: dict[str, dict[str, str]] = {}
        """Router target -> {backend URL: role} from its HTTP API (``sources.router_workers``)."""

    def set_roles(self, target: str, roles: dict[str, str]) -> None:
        """Keep a router's newest ``/workers`` answer (until the next one)."""
        self.roles[target] = roles

    def rows(self, targets: Iterable[TargetHistory], window_s: float, t_mono: float,
             interval_s: float) -> list[RouterRow]:
        """One ``RouterRow`` per router target over ``window_s`` ending at ``t_mono``."""
        out = []
        for ts in targets:
            if not is_router(ts):
                continue
            state, error = ts.state(t_mono, interval_s)
            row = RouterRow(target=ts.name, engine=ts.engine, engine_version=ts.version,
                            state=state, error=error, http_status=ts.http_status,
                            last_ok_age_s=(t_mono - ts.last_ok_mono)
                            if ts.last_ok_mono is not None else None)
            out.append(router_row(row, ts.window(window_s, t_mono), self.roles.get(ts.name)))
        return out

    @staticmethod
    def backend_urls(targets: Iterable[TargetHistory]) -> list[str]:
        """Every worker URL the routers name in their newest sample (for rediscovery)."""
        out: list[str] = []
        for ts in targets:
            rs = router_of(ts.recent[-1]) if ts.recent else None
            for url in rs.backends if rs is not None else {}:
                if url not in out:
                    out.append(url)
        return out
