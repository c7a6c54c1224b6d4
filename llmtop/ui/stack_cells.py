"""Cells of the serving stack's rows in the engines table: a router's STATE (healthy
backends, open breakers, retries) and a backend's name (role, its share of the router's
requests beside its share of the pool's capacity) and STATE as its router sees it."""

from __future__ import annotations

from rich.text import Text

from llmtop.model import GOOD_STATES, EngineRow
from llmtop.model.stack import BackendRow, RouterRow
from llmtop.ui import fmt
from llmtop.ui.fmt import S

__all__ = ["POLICY_SHORT", "ROLE_MARKS", "head_name", "member_name", "member_state",
           "router_state"]

ROLE_MARKS = {"prefill": "P", "decode": "D", "both": "PD"}
"""The role's mark in a backend's name (``P`` prefill, ``D`` decode, ``PD`` both)."""

POLICY_SHORT = {"round_robin": "rr", "power_of_two": "p2c", "cache_aware": "cache",
                "consistent_hash": "chash", "random": "rand", "prefix_hash": "prefix",
                "least_load": "least"}
"""Routing policies (the vLLM router's and SGLang gateway's ``--policy`` words) as a
router row names them where the full word does not fit."""


def head_name(row: EngineRow, depth: int, width: int) -> str:
    """A router's row (``▾ vllm-router :29000 round_robin``; where that does not fit the
    policy shortened, ``rr``, then the family, ``▾ router :29000 rr``) or a pool's
    (`` ▾ prefill pool (2)``), one space per level."""
    pad = " " * depth
    target = fmt.compact_target(row.target)
    policy = row.model or ""
    short = POLICY_SHORT.get(policy, policy)
    plain = target.replace(f"{row.engine} ", "router ", 1) if row.engine else target
    for text in (f"{pad}{target} {policy}", f"{pad}{target} {short}",
                 f"{pad}{plain} {short}"):
        if len(text.rstrip()) <= width:
            return text.rstrip()
    return text.rstrip()[:width]


def router_state(router: RouterRow, row: EngineRow, width: int) -> Text:
    """A router's STATE: its own scrape's badge when that is bad, else ``1 BREAKER`` (open
    circuit breakers), ``1/2 UP`` (a backend unhealthy), ``RETRY 0.4/s``, or ``2/2 UP``."""
    if row.state not in GOOD_STATES:
        return fmt.badge(row, width=width)
    h, n = router.healthy_backends, router.total_backends
    up = f"{h if h is not None else '?'}/{n} UP" if n else "ok"
    if router.open_breakers:
        return Text(f"{router.open_breakers} BREAKER"[:width], style=S("gauge-crit bold"))
    if h is not None and n and h < n:
        return Text(up[:width], style=S("gauge-warn"))
    if router.retries_per_s:
        return Text(f"RETRY {fmt.fmt_rate(router.retries_per_s)}/s"[:width],
                    style=S("gauge-warn"))
    return Text(up[:width], style=S("gauge-ok"))


def member_state(backend: BackendRow, width: int) -> Text | None:
    """What the router says of a backend that is up for llmtop: ``BREAKER`` (its circuit
    breaker is open) or ``UNHEALTHY`` (its health check fails); None when it says neither."""
    if backend.breaker_open:
        return Text("BREAKER"[:width], style=S("gauge-crit bold"))
    if backend.healthy is False:
        return Text("UNHEALTHY"[:width], style=S("gauge-warn"))
    return None


def member_name(row: EngineRow, backend: BackendRow, depth: int, width: int) -> str:
    """``  vllm :8001 D req 62% cap 50%``: the backend's role, its share of the router's
    requests and its share of the pool's capacity (running limit, else KV); the short form
    ``62%/50%`` where the long one does not fit."""
    pad = " " * depth
    mark = ROLE_MARKS.get(backend.role or "", "")
    head = f"{pad}{fmt.compact_target(row.target)}{' ' + mark if mark else ''}"
    share, cap = fmt.fmt_pct(backend.routed_share), fmt.fmt_pct(backend.capacity_share)
    long = f"{head} req {share} cap {cap}"
    return long if len(long) <= width else f"{head} {share}/{cap}"[:width]
