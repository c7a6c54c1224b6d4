"""An engine's health endpoint: which path to ask, and what its answer says.

The monitor asks it only for a row that may be stuck (``diagnose.rules.stuck.wants_health``):
the ``stuck`` finding (vLLM's admission stall, vllm-project/vllm#53130) is named when the
engine makes no token while this endpoint answers 200, the case a health check misses.

Health paths, from each engine's source or docs:

=========  ====================  ========================================================
engine     path                  source
=========  ====================  ========================================================
vllm       ``/health``           vllm/entrypoints/serve/instrumentator/health.py: 200 with
                                 an empty body, 503 on ``EngineDeadError``
sglang     ``/health``           docs basic_usage/native_api.md ("/health",
                                 "/health_generate"); python/sglang/srt/entrypoints/
                                 http_server.py
tgi        ``/health``           router/src/server.rs ``health``: 200, or 503
                                 ``{"error": "unhealthy", "error_type": "healthcheck"}``
trtllm     ``/health``           docs/source/commands/trtllm-serve.rst ("/health",
                                 "/metrics", "/version")
llamacpp   ``/health``           tools/server/README.md: 503 while the model loads, 200
                                 ``{"status":"ok"}``
triton     ``/v2/health/ready``  the KServe v2 protocol Triton serves (server
                                 qa/L0_http); on its HTTP port, never the metrics port
                                 (8002): known only when the metrics were found on another
                                 port than the target's own (``Scraper.health_url``)
ollama     none                  its API has no health route: unknown
=========  ====================  ========================================================

Any other engine (lmdeploy, or none detected): unknown, not asked.

What an answer becomes (``health_status``), as a Kubernetes ``httpGet`` probe judges it, on
the status code alone: the HTTP status code (an int) whenever the server answered HTTP,
whatever the body (vLLM's is empty; an HTML or garbage body is still that code);
``"timeout"`` when no answer came within the scrape's timeout; ``"down"`` when the connection
failed or the answer was not HTTP. The body is never kept or recorded.
"""

from __future__ import annotations

from llmtop.model import RawScrape

__all__ = ["HEALTH_BODY_CAP", "HEALTH_PATHS", "health_path", "health_status", "is_health_url"]

HEALTH_PATHS: dict[str, str] = {
    "vllm": "/health",
    "sglang": "/health",
    "tgi": "/health",
    "trtllm": "/health",
    "llamacpp": "/health",
    "triton": "/v2/health/ready",
}
"""Engine id -> its health path (see the module doc); an engine not here has none known."""

HEALTH_BODY_CAP = 64 * 1024
"""Bytes of a health answer read at most (the body is dropped; only the code counts)."""


def health_path(engine: str | None) -> str | None:
    """The health path of ``engine``; None when it has none known (Ollama, unknown)."""
    return HEALTH_PATHS.get(engine or "")


def is_health_url(url: str) -> bool:
    """True for a URL ``Scraper.health`` fetched (a recording's health record)."""
    path = url.split("?", 1)[0].rstrip("/")
    return any(path.endswith(p) for p in set(HEALTH_PATHS.values()))


def health_status(raw: RawScrape) -> int | str:
    """What one health answer says: its HTTP status code, ``timeout`` or ``down``."""
    if raw.http_status is not None:
        return raw.http_status
    if raw.status == "down" and (raw.error or "").startswith("timeout"):
        return "timeout"
    return "down"
