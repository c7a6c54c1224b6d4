"""The vLLM router (``pip install vllm-router``): ``vllm_router_*`` on its own
``--prometheus-port`` (default 29000). Names from ``vllm-project/router`` ``src/metrics.rs``.

Per worker (``worker`` label = its URL): ``processed_requests_total`` (routed),
``worker_health`` (1/0), ``cb_state`` (0 closed, 1 open, 2 half open), ``cb_outcomes_total
{outcome}``, ``running_requests`` / ``worker_load``; P/D mode: ``pd_prefill_requests_total``,
``pd_decode_requests_total`` (which give the roles), ``pd_pending_decode_requests`` and
``pd_active_decode_requests`` (``{worker, rank="aggregate"}`` in 0.1.17).
Router level: ``requests_total{route}``, ``request_duration_seconds`` /
``pd_request_duration_seconds`` / ``generate_duration_seconds`` (0.1.17 outside P/D),
``retries_total``, ``request_errors_total``, ``policy_decisions_total{policy,worker}``,
``active_workers``, ``pd_decode_pending_seconds`` (a summary: its windowed mean from
``_sum``/``_count``, and its ``quantile="0.95"`` as ``decode_pending_p95_router_window_s``).

The summary's quantiles are not over llmtop's window: ``metrics-exporter-prometheus`` (the
router's exporter, ``src/metrics.rs`` sets buckets only for ``*duration_seconds``) renders
other histograms as summaries over a rolling window of 3 buckets × 20 s (its defaults, which
the router keeps): the router's last ~60 s. They cannot be subtracted or windowed, so the row
shows that p95 under its own name. The router exports no other summary llmtop reads (its
tokenizer and agent-aware ones are not latency of the serving path).

The older SGLang router (``sgl_router_*``, which the vLLM router was forked from) has the same
names under its prefix: ``read`` takes the prefix.
"""

from __future__ import annotations

from typing import Any

from llmtop.model import EngineSample
from llmtop.model.stack import RouterSample
from llmtop.parse.router_common import (
    Index,
    by_label,
    first_hist,
    make_sample,
    parse_router,
    policy_of,
    put_backend,
    roles_from_counters,
    total,
)

__all__ = ["normalize", "read"]

PREFIX = "vllm_router_"
_BACKEND_GAUGES = {"worker_health": "healthy", "cb_state": "breaker",
                   "running_requests": "active", "worker_load": "load"}
_BACKEND_COUNTERS = {"processed_requests": "routed", "pd_prefill_requests": "prefill_routed",
                     "pd_decode_requests": "decode_routed"}


def _ranked(index: Index, name: str) -> dict[str, float]:
    """Per worker; where the router also writes a ``rank="aggregate"`` series (0.1.17 P/D
    gauges), that one alone (the per-rank ones would count twice)."""
    if any(s.labels.get("rank") == "aggregate" for s in index.get(name, ())):
        return by_label(index, name, where={"rank": "aggregate"})
    return by_label(index, name)


def read(index: Index, p: str) -> RouterSample:
    """The ``RouterSample`` of a fork of the SGLang router whose names start with ``p``."""
    rs = RouterSample(policy=policy_of(index, p + "policy_decisions"))
    for name, key in _BACKEND_GAUGES.items():
        for url, v in by_label(index, p + name).items():
            put_backend(rs, url, **{key: v})
    for name, key in _BACKEND_COUNTERS.items():
        for url, v in by_label(index, p + name).items():
            put_backend(rs, url, **{key: v})
    for url, v in _ranked(index, p + "pd_pending_decode_requests").items():
        put_backend(rs, url, pending=v)
    for url, v in _ranked(index, p + "pd_active_decode_requests").items():
        put_backend(rs, url, active=v)
    for url, v in by_label(index, p + "cb_outcomes", where={"outcome": "failure"}).items():
        put_backend(rs, url, failures=v)
    decisions = by_label(index, p + "policy_decisions")
    for url, v in decisions.items():  # routed, where the worker counter is absent
        if url not in rs.backends or rs.backends[url].routed is None:
            put_backend(rs, url, routed=v)
    roles_from_counters(rs)
    prefill = [b.prefill_routed for b in rs.backends.values() if b.prefill_routed is not None]
    routed = [b.routed for b in rs.backends.values() if b.routed is not None]
    # P/D: one request is one prefill and one decode decision; count it once
    requests = total(index, p + "pd_requests") if prefill else None
    if requests is None and (prefill or routed):
        requests = sum(prefill or routed)
    if requests is None:
        requests = total(index, p + "requests")
    rs.requests = requests
    rs.retries = total(index, p + "retries")
    rs.errors = total(index, p + "request_errors")
    rs.active_workers = total(index, p + "active_workers")
    rs.request = first_hist(index, p + "pd_request_duration_seconds",
                            p + "request_duration_seconds", p + "generate_duration_seconds")
    rs.decode_pending = first_hist(index, p + "pd_decode_pending_seconds")
    p95 = total(index, p + "pd_decode_pending_seconds", {"quantile": "0.95"})
    if p95 is not None and p95 >= 0:
        rs.decode_pending_p95_router_window_s = p95
    return rs


def normalize(body: str, *, headers: dict[str, str] | None = None,
              identity: dict[str, Any] | None = None) -> EngineSample:
    """Parse a vLLM router's ``/metrics``. Raises ``ParseError``."""
    index = parse_router(body, (PREFIX,), "is this a vLLM router's metrics port?")
    return make_sample("vllm-router", read(index, PREFIX))
