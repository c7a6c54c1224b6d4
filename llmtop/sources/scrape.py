"""Async scraping of metrics endpoints -> ``RawScrape`` (never raises).

One shared ``httpx.AsyncClient`` per (TLS-verify, loopback) pair: HTTP/1.1, keep-alive.
``http://`` goes over ``plainhttp.PlainHTTPTransport`` (a tenth of httpcore's CPU per scrape),
``https://`` over httpx's own transport. A remote target goes through the proxy that
``HTTP(S)_PROXY``/``ALL_PROXY`` name unless ``NO_PROXY`` covers it (httpx's proxy transport);
loopback targets never use a proxy.

Classification (``RawScrape.status`` / ``error``):

* ``down``: connection refused, DNS failure, reset or closed before a response,
  TLS failure, ``timeout after 2.0s`` (the per-target timeout covers the whole request).
* ``unauthorized``: HTTP 401/403 (``unauthorized (HTTP 401) — set an API key``, or
  ``— the API key was refused`` when one was sent).
* ``http_error``: any other non-2xx (``HTTP 503``; a short JSON error message is appended,
  e.g. llama.cpp's 501 "Start it with --metrics"), or a redirect loop.
* ``bad_payload``: an HTML page (content type or ``<!doctype``/``<html`` start), a body over
  ``Config.body_cap_bytes`` (``body over 32 MiB``; reading stops at the cap) or a truncated
  body (Content-Length mismatch, connection closed mid-body).
* ``ok``: anything else, body decoded as UTF-8 (a leading BOM dropped), errors replaced.
  Garbage stays ``ok``; the store turns a ``ParseError`` into ``bad_payload``.

Metrics path: ``Target.metrics_path``, else by engine (hint, else what identity said):
ollama ``/api/ps``; trtllm ``/prometheus/metrics`` when it answered 200 at identify time;
everything else ``/metrics``. A Triton target answering 404 on its HTTP port is retried
once on port 8002, and the working URL is remembered.

Identity: the first successful scrape of a target (and the first after ``reidentify``, or
after the ``Process-Start-Time-Unix`` header changes) carries ``RawScrape.identity``;
``identify`` probes the identity endpoints in parallel (<= ``IDENTITY_TIMEOUT_S`` each, 256 KiB
cap) and keeps only whitelisted fields (SGLang's ``/server_info`` contains its ``api_key``:
never copied).
With ``defer_identity`` (the monitor's scraper) identity never delays data of an engine whose
metrics name its models (a hint in ``MODELS_IN_METRICS``): an ok scrape goes out without it
and the next scrape carries it (``identity_pending`` says so meanwhile). Any other target
(llama.cpp, TGI, trtllm-serve, or no hint) waits for identity beside its first scrape: its
model name, and so its model key, comes from identity, and a first sample keyed ``default``
would leave every window with one point per key and every rate null.
Identity requests ask the server to close their connections (``Connection: close``).

Costs: an SSL context (loading the certificate store) is built only at the first https
request; plain http never builds one.

Secrets: the bearer token and configured headers are sent, never recorded; only
``SAFE_HEADERS`` of the response are kept.

Side polls: llama-server's ``/slots`` (``slots``), an engine's health endpoint
(``health_url``, ``health``: asked only for a row that may be stuck, ``sources.health``) and
an sglang-router's ``/workers`` (``workers``: roles per backend), each one GET with the
scrape's timeout, TLS and API key.

Where the parts live: ``scrape_http`` (clients, the lean plain-http path, one GET classified),
``scrape_identity`` (identity endpoints, engine and metrics path from them); this module keeps
``Scraper`` (per-target state, when identity is asked and attached) and re-exports the names.
"""


from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from llmtop import clock
from llmtop.config import Config, Target
from llmtop.model import SCRAPE_HEALTH, SCRAPE_SLOTS, SCRAPE_WORKERS, RawScrape
from llmtop.sources.scrape_http import SAFE_HEADERS, HttpFetcher
from llmtop.sources.scrape_http import env_proxy as _env_proxy  # noqa: F401 (tests use it)
from llmtop.sources.scrape_identity import (
    IDENTITY_PATHS,
    IDENTITY_RETRY_S,
    IDENTITY_TIMEOUT_S,
    MODELS_IN_METRICS,
    default_metrics_path,
    engine_from_identity,
    identify,
)
from llmtop.urls import netloc

__all__ = [
    "IDENTITY_PATHS",
    "IDENTITY_TIMEOUT_S",
    "MODELS_IN_METRICS",
    "SAFE_HEADERS",
    "Scraper",
    "default_metrics_path",
    "engine_from_identity",
]


@dataclass(slots=True)
class _State:
    identity: dict[str, Any] | None = None
    ident_pending: bool = False
    ident_tried: float | None = None
    metrics_url: str | None = None
    triton_tried: bool = False
    start_header: str | None = None
    ident_task: asyncio.Future[dict[str, Any]] | None = None
    """Identity still being asked after an ok scrape went out without it (defer_identity)."""


class Scraper:
    """Scrapes targets; one instance per run (it keeps connections and per-target state)."""

    def __init__(self, config: Config, *, transport: httpx.AsyncBaseTransport | None = None,
                 defer_identity: bool = False):
        self._config = config
        self._defer_identity = defer_identity
        """True: an ok scrape never waits for identity (see ``identity_pending``)."""
        self._http = HttpFetcher(config, transport)
        self._state: dict[str, _State] = {}

    def verify_for(self, target: Target) -> bool:
        """Whether TLS certificates are verified for ``target`` (on unless disabled)."""
        return self._http.verify_for(target)

    def metrics_url(self, target: Target) -> str:
        """The URL ``scrape`` fetches now for ``target``."""
        st = self._state.get(target.name)
        if st is not None and st.metrics_url:
            return st.metrics_url
        path = target.metrics_path
        if path is None:
            ident = st.identity if st else None
            path = default_metrics_path(target.engine or engine_from_identity(ident), ident)
        return target.base_url.rstrip("/") + path

    def identity_pending(self, target_name: str) -> bool:
        """True while identity for the target is asked in the background: with
        ``defer_identity`` the first ok scrape goes out without it and the next scrape (which
        waits for it if needed, <= ``IDENTITY_TIMEOUT_S``) carries it."""
        st = self._state.get(target_name)
        return st is not None and st.ident_task is not None

    def reidentify(self, target_name: str) -> None:
        """Probe identity again; the next ok scrape carries it (call after a restart)."""
        st = self._state.get(target_name)
        if st is not None:
            st.identity = None
            st.ident_tried = None

    async def scrape(self, target: Target) -> RawScrape:
        """Fetch ``target``'s metrics once; never raises (see the module docstring)."""
        try:
            return await self._scrape(target)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            return RawScrape(
                target=target.name,
                url=target.base_url,
                t_wall=clock.time(),
                t_mono=clock.monotonic(),
                status="down",
                error=f"internal error: {type(exc).__name__}",
                engine_hint=target.engine,
            )

    async def _scrape(self, target: Target) -> RawScrape:
        st = self._state.setdefault(target.name, _State())
        if st.ident_task is not None:  # asked after the previous ok scrape: attach it now
            task, st.ident_task = st.ident_task, None
            found = await task
            if st.identity is None:  # else it kept what it found (and marked it pending)
                st.identity = found
                st.ident_pending = True
        now = time.monotonic()
        ident: dict[str, Any] | None = None
        want_ident = st.identity is None and (
            st.ident_tried is None or now - st.ident_tried >= IDENTITY_RETRY_S
        )
        if want_ident and target.engine == "trtllm" and target.metrics_path is None:
            # the path depends on what identity finds: probe first
            ident = await self._probe_identity(target, st)
            want_ident = False
        url = self.metrics_url(target)
        if want_ident and self._defer_identity and target.engine in MODELS_IN_METRICS:
            # Neither the URL nor the model key depends on identity: an ok answer goes out
            # at once, identity follows with the next scrape (only versions and limits).
            task = asyncio.ensure_future(self._probe_identity(target, st))
            res, elapsed = await self._http.fetch(target, url)
            if res.status == "ok":
                st.ident_task = task
            else:
                ident = await task
        elif want_ident:
            (res, elapsed), ident = await asyncio.gather(
                self._http.fetch(target, url), self._probe_identity(target, st)
            )
            if self.metrics_url(target) != url:
                # identity changed the path (trtllm, ollama: whose /metrics is a 404)
                url = self.metrics_url(target)
                res, elapsed = await self._http.fetch(target, url)
        else:
            res, elapsed = await self._http.fetch(target, url)

        if (
            res.http_status == 404
            and not st.triton_tried
            and (target.engine or engine_from_identity(st.identity)) == "triton"
            and target.metrics_path in (None, "/metrics")
            and target.port != 8002
        ):
            st.triton_tried = True
            parts = urlsplit(url)
            host = parts.hostname or target.host
            alt = urlunsplit((parts.scheme, netloc(host, 8002), parts.path, parts.query, ""))
            res2, el2 = await self._http.fetch(target, alt)
            if res2.status == "ok":
                st.metrics_url = alt
                res, elapsed, url = res2, el2, alt
            else:
                res.error = "HTTP 404 (Triton serves metrics on port 8002: give host:8002)"

        if res.status == "ok":
            start_hdr = (res.headers or {}).get("process-start-time-unix")
            if start_hdr and st.start_header and start_hdr != st.start_header:
                st.identity = None  # restarted: learn version and models again
                ident = None
            if start_hdr:
                st.start_header = start_hdr
            if st.identity is None and st.ident_task is None:
                if ident is None and self._defer_identity and (
                        target.engine in MODELS_IN_METRICS):
                    st.ident_task = asyncio.ensure_future(self._probe_identity(target, st))
                else:
                    if ident is None:
                        ident = await self._probe_identity(target, st)
                    st.identity = ident
                    st.ident_pending = True
        identity = None
        if res.status == "ok" and st.ident_pending:
            identity = st.identity
            st.ident_pending = False
        return RawScrape(
            target=target.name,
            url=url,
            t_wall=clock.time(),
            t_mono=clock.monotonic(),
            status=res.status,
            http_status=res.http_status,
            content_type=res.content_type,
            body=res.body if res.status == "ok" else None,
            error=res.error,
            elapsed_s=elapsed,
            headers=res.headers,
            identity=identity,
            engine_hint=target.engine or engine_from_identity(st.identity),
        )

    async def slots(self, target: Target) -> RawScrape:
        """llama-server's ``/slots`` (in-flight requests), reduced to numbers
        (``sources.slots``: no prompt text); never raises."""
        from llmtop.sources.slots import reduce_slots

        url = target.base_url.rstrip("/") + "/slots"
        return await self._side_get(SCRAPE_SLOTS, target, url, reduce=reduce_slots,
                                    what="/slots list", engine_hint="llamacpp")

    def health_url(self, target: Target, engine: str | None) -> str | None:
        """The health URL of ``target`` (``sources.health``), None when unknown: an engine
        without one (Ollama), or Triton whose HTTP port is not known (a target given as its
        metrics port: its health is on the HTTP port, which the metrics do not name)."""
        from llmtop.sources.health import health_path

        path = health_path(engine)
        if path is None:
            return None
        base = target.base_url.rstrip("/")
        if engine == "triton":
            st = self._state.get(target.name)
            metrics = urlsplit(st.metrics_url if st and st.metrics_url
                               else self.metrics_url(target))
            if metrics.port == urlsplit(base).port:
                return None  # the target is the metrics port: its HTTP port is unknown
        return base + path

    async def health(self, target: Target, url: str) -> RawScrape:
        """One GET of ``url`` (``health_url``) with the scrape's timeout, TLS and API key;
        the body is dropped (``sources.health``: only the code counts); never raises."""
        from llmtop.sources.health import HEALTH_BODY_CAP

        return await self._side_get(SCRAPE_HEALTH, target, url, cap=HEALTH_BODY_CAP)

    async def workers(self, target: Target) -> RawScrape:
        """A router's worker list (``sources.router_workers``: ``{url: role}``) from its
        serving URL ``target.api_url``; never raises."""
        from llmtop.sources.router_workers import WORKERS_PATH, reduce_workers

        url = (target.api_url or target.base_url).rstrip("/") + WORKERS_PATH
        return await self._side_get(SCRAPE_WORKERS, target, url, reduce=reduce_workers,
                                    what="/workers list")

    async def _side_get(self, kind: str, target: Target, url: str, *,
                        reduce: Callable[[str | None], str | None] | None = None,
                        what: str = "", cap: int | None = None,
                        engine_hint: str | None = None) -> RawScrape:
        r"""One side poll's GET (``slots``, ``health``, ``workers``) as a ``RawScrape`` of
        ``kind`` (``model.SCRAPE_KINDS``): the body ``reduce``\ d (an answer it rejects is a
        bad payload, "not a ``what``"), or dropped without ``reduce``; never raises."""
        try:
            res, elapsed = await self._http.fetch(target, url, cap=cap)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # pragma: no cover - defensive
            return RawScrape(target=target.name, url=url, t_wall=clock.time(),
                             t_mono=clock.monotonic(), status="down",
                             error=f"internal error: {type(exc).__name__}", kind=kind)
        status, error, body = res.status, res.error, None
        if reduce is not None and status == "ok":
            body = reduce(res.body)
            if body is None:
                status, error = "bad_payload", f"not a {what}"
        return RawScrape(target=target.name, url=url, t_wall=clock.time(),
                         t_mono=clock.monotonic(), status=status, http_status=res.http_status,
                         content_type=res.content_type if reduce is not None else None,
                         body=body, error=error, elapsed_s=elapsed, engine_hint=engine_hint,
                         kind=kind)

    async def _probe_identity(self, target: Target, st: _State) -> dict[str, Any]:
        """``identify`` and keep the answer when anything answered (besides ``host``)."""
        st.ident_tried = time.monotonic()
        ident = await self.identify(target)
        if len(ident) > 1:
            st.identity = ident
            st.ident_pending = True
        return ident

    async def identify(self, target: Target) -> dict[str, Any]:
        """Ask the identity endpoints in parallel (see ``scrape_identity.identify``); never
        raises."""
        return await identify(self._http, target)

    async def aclose(self) -> None:
        """Stop identity still being asked and close every connection."""
        tasks = [st.ident_task for st in self._state.values() if st.ident_task is not None]
        for st in self._state.values():
            st.ident_task = None
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._http.aclose()
