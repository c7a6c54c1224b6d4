"""SGLang Model Gateway's ``GET /workers`` (sglang-router 0.3.x): each worker's role.

Its ``/metrics`` names roles only per pool (``smg_worker_pool_size{worker_type}``), never per
URL; the HTTP API on the router's **serving** port (``--port``, not ``--prometheus-port``)
lists ``{"workers": [{"url", "worker_type": "prefill" | "decode" | "regular", "is_healthy",
…}], "stats": {…}}`` (captured from the real 0.3.2 router:
``tests/fixtures/routers/real/sglang-router-pd-workers.json``). ``regular`` (a worker outside
P/D) gives no role, as the other routers' non-P/D backends have none. Pure parsing: the
monitor polls it beside the router's scrape when it knows the serving URL
(``Target.api_url``, set by discovery from the router's ``--port``).
"""

from __future__ import annotations

import json

__all__ = ["WORKERS_PATH", "reduce_workers", "roles_of"]

WORKERS_PATH = "/workers"
_ROLES = {"prefill": "prefill", "decode": "decode"}


def reduce_workers(text: str | None) -> str | None:
    """The answer as compact JSON ``{url: role}`` (role ``prefill`` / ``decode`` / null);
    None when it is not a worker list (an error object, HTML, garbage)."""
    try:
        doc = json.loads(text or "")
    except (ValueError, RecursionError):
        return None
    workers = doc.get("workers") if isinstance(doc, dict) else None
    if not isinstance(workers, list):
        return None
    out: dict[str, str | None] = {}
    for w in workers:
        if isinstance(w, dict) and isinstance(url := w.get("url"), str) and url:
            wt = w.get("worker_type")
            out[url] = _ROLES.get(wt) if isinstance(wt, str) else None
    return json.dumps(out, separators=(",", ":"), sort_keys=True)


def roles_of(body: str | None) -> dict[str, str]:
    """``{url: role}`` of a ``reduce_workers`` body (workers without a role left out)."""
    try:
        doc = json.loads(body or "")
    except (ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {u: r for u, r in doc.items() if isinstance(u, str) and r in ("prefill", "decode")}
