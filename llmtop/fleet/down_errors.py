"""The last scrape error of down targets, from the server's ``/api/v1/targets`` (fleet
mode's STATE column says why a target is down). Split out of ``fleet/monitor.py``."""

from __future__ import annotations

from typing import Any

from llmtop.sources.prometheus import PromError

__all__ = ["ERRORS_TTL_S", "Cache", "scrape_errors"]

ERRORS_TTL_S = 30.0
"""Down targets' scrape errors are asked again after this long (or when the set changes)."""

Cache = tuple[frozenset[Any], float, dict[tuple[str, ...], str]]
"""(the down targets' keys, when asked, their errors)."""


async def scrape_errors(client: Any, down: dict[tuple[str, ...], dict[str, str]],
                        cached: Cache | None, now: float
                        ) -> tuple[dict[tuple[str, ...], str], Cache | None]:
    """(errors by down target's key, the new cache): the whole target list is asked at most
    every ``ERRORS_TTL_S`` while the same targets stay down."""
    keys = frozenset(down)
    if cached is not None and cached[0] == keys and 0 <= now - cached[1] < ERRORS_TTL_S:
        return cached[2], cached
    try:
        body = await client.get("/api/v1/targets", {"state": "active"})
    except PromError:
        return {}, cached
    out: dict[tuple[str, ...], str] = {}
    want = {(m.get("job", ""), m.get("instance", "")): k for k, m in down.items()}
    for tg in (body.get("data") or {}).get("activeTargets") or []:
        labels = tg.get("labels") or {}
        k = want.get((labels.get("job", ""), labels.get("instance", "")))
        if k is not None and tg.get("lastError"):
            out[k] = f"down: {tg['lastError']}"
    return out, (keys, now, out)
