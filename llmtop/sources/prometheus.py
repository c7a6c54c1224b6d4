"""HTTP client for a Prometheus-compatible query API (Prometheus, VictoriaMetrics, Thanos, Mimir).

Instant and range queries (POST form, so long union queries fit), the response envelope
(``status``/``data``/``errorType``/``error``/``warnings``/``infos``, VictoriaMetrics'
``isPartial``), auth (bearer token file re-read when it changes, basic auth with a password
file, extra headers and query parameters, CA file, insecure TLS), a cap on concurrent
queries and a per-query timeout, and backend detection. Every failure is a ``PromError``
whose ``kind`` is a state the header and ``--once`` can show; credentials never appear in a
message, a log line or ``display_url``.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import math
import os
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import quote_plus, urlsplit, urlunsplit

import httpx
import orjson

from llmtop.config import PrometheusConfig
from llmtop.sources.plainhttp import PlainHTTPTransport
from llmtop.sources.scrape_http import connect_reason
from llmtop.urls import netloc

__all__ = ["BACKENDS", "Backend", "PromClient", "PromError", "PromResult", "display_url",
           "gc_paused", "parse_value"]

BACKENDS = ("prometheus", "victoriametrics", "thanos", "mimir")

MAX_CONCURRENT = 4
"""Queries in flight at once against the server."""


_PARSE_ERRORS = ("unparsed data", "cannot parse", "parse error", "syntax error",
                 "unexpected token")
"""VictoriaMetrics answers a query it cannot read with 422, not 400 ``bad_data``."""


class PromError(Exception):
    """A query failed. ``kind``: ``unreachable`` | ``unauthorized`` | ``bad_query`` |
    ``too_big`` | ``bad_payload`` | ``not_found`` | ``http_error``."""

    def __init__(self, kind: str, message: str, http_status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.http_status = http_status


@dataclass(slots=True)
class PromResult:
    """The ``data`` of one successful answer, with what makes it incomplete."""

    result_type: str
    result: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    partial: bool = False
    stats: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Backend:
    """What answered: ``kind`` (one of ``BACKENDS``) and its version when known."""

    kind: str
    version: str | None = None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a burst of allocations that make no cycles:
    decoding a 500-instance answer makes ~250k dicts and lists, and every few hundred of them
    a collection would walk the young ones again (that doubled the decode's CPU). Restored
    after, whatever happens. Keep it short: at most one fleet refresh (about a second),
    whose awaits let other tasks run meanwhile with the collector off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_value(text: Any) -> float:
    """A sample value as the API writes it (a string; ``NaN``, ``+Inf`` allowed)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def display_url(url: str) -> str:
    """``url`` without user info, query or fragment: safe for the screen and JSON."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, netloc(parts.hostname or "", parts.port or None),
                       parts.path.rstrip("/"), "", ""))


class _Secret:
    """A credential read from a file, re-read when the file's mtime or size changes."""

    def __init__(self, path: str) -> None:
        self.path = os.path.expanduser(path)
        self._stamp: tuple[float, int] | None = None
        self._value: str | None = None

    def get(self) -> str | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        stamp = (st.st_mtime, st.st_size)
        if stamp != self._stamp:
            try:
                with open(self.path, encoding="utf-8") as f:
                    self._value = f.read().strip() or None
            except OSError:
                return None
            self._stamp = stamp
        return self._value


_FORM = {"content-type": "application/x-www-form-urlencoded"}


@lru_cache(maxsize=64)
def _quoted(text: str) -> str:
    """``quote_plus`` of a form value: the refresh's long queries are the same each time."""
    return quote_plus(text)


def _form(params: dict[str, Any]) -> bytes:
    """A POST body as ``urlencode`` writes it, the queries' quoting reused."""
    return "&".join(f"{_quoted(str(k))}={_quoted(str(v))}" for k, v in params.items()
                    ).encode("ascii")


class PromClient:
    """Async client for one server. ``query``/``query_range``/``get`` raise ``PromError``."""

    def __init__(self, cfg: PrometheusConfig, *,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.cfg = cfg
        parts = urlsplit(cfg.url if "://" in cfg.url else "http://" + cfg.url)
        self._url_user = parts.username
        self._url_pass = parts.password
        self.base = display_url(urlunsplit(parts))
        self.display_url = self.base
        self._token = _Secret(cfg.bearer_token_file) if cfg.bearer_token_file else None
        self._password = _Secret(cfg.basic_password_file) if cfg.basic_password_file else None
        verify: bool | ssl.SSLContext = not cfg.insecure
        if cfg.ca_file and not cfg.insecure:
            verify = ssl.create_default_context(cafile=os.path.expanduser(cfg.ca_file))
        if transport is None and parts.scheme == "http":
            # llmtop's lean HTTP/1.1 transport (sources/plainhttp.py): a large fleet's refresh
            # reads megabytes of answers, and the client's own CPU must stay small beside them
            transport = PlainHTTPTransport()
        self._client = httpx.AsyncClient(
            transport=transport, verify=verify, timeout=httpx.Timeout(cfg.timeout_s),
            follow_redirects=False, trust_env=False)
        self._sem = asyncio.Semaphore(MAX_CONCURRENT)
        self.requests = 0
        """Requests sent so far (benchmarks and tests count them)."""

    # ------------------------------------------------------------------ auth

    def _headers(self) -> dict[str, str]:
        h = {"Accept": "application/json"}
        for k, v in self.cfg.headers:
            h[k] = v
        if self._token is not None:
            tok = self._token.get()
            if tok:
                h["Authorization"] = f"Bearer {tok}"
        user = self.cfg.basic_user or self._url_user
        if user and "Authorization" not in h:
            pw = self._password.get() if self._password is not None else self._url_pass
            raw = f"{user}:{pw or ''}".encode()
            h["Authorization"] = "Basic " + base64.b64encode(raw).decode()
        return h

    def _auth_hint(self, status: int) -> str:
        """Which credential is missing or refused, never its value."""
        what = "401 Unauthorized" if status == 401 else "403 Forbidden"
        if self._token is not None:
            if self._token.get() is None:
                return f"{what}: the bearer token file {self._token.path} is missing or empty"
            return f"{what}: the bearer token from {self._token.path} was refused"
        if self.cfg.basic_user or self._url_user:
            if self._password is not None and self._password.get() is None:
                return f"{what}: the basic-auth password file {self._password.path} is missing"
            return f"{what}: basic auth for user {self.cfg.basic_user or self._url_user!r} " \
                "was refused"
        tenant = [k for k, _ in self.cfg.headers]
        extra = f" (headers sent: {', '.join(tenant)})" if tenant else ""
        return (f"{what}: no credential configured{extra}; set bearer_token_file or "
                "basic_user/basic_password_file in [prometheus] (or --prometheus-token-file)")

    # ------------------------------------------------------------------ requests

    async def _send(self, method: str, path: str, params: dict[str, Any]) -> httpx.Response:
        url = self.base + path
        all_params = dict(self.cfg.params)
        all_params.update(params)
        async with self._sem:
            self.requests += 1
            try:
                if method == "POST":
                    return await self._client.post(url, content=_form(all_params),
                                                   headers=self._headers() | _FORM)
                return await self._client.get(url, params=all_params, headers=self._headers())
            except httpx.TimeoutException:
                raise PromError("unreachable", f"timed out after {self.cfg.timeout_s:g} s "
                                f"({self.display_url})") from None
            except httpx.HTTPError as exc:
                reason = connect_reason(exc, urlsplit(url).hostname or "") if isinstance(
                    exc, httpx.ConnectError) else str(exc).split("\n")[0] or type(exc).__name__
                raise PromError("unreachable",
                                f"cannot reach {self.display_url}: {reason}") from None

    def _envelope(self, resp: httpx.Response) -> dict[str, Any]:
        status = resp.status_code
        if status in (401, 403):
            raise PromError("unauthorized", self._auth_hint(status), status)
        ctype = resp.headers.get("content-type", "")
        raw = resp.content  # bytes: orjson reads UTF-8 itself, no decoded copy of a big answer
        head = raw[:64].lstrip()[:15].decode("utf-8", "replace").lower()
        if "html" in ctype or head.startswith(("<!doctype", "<html")):
            raise PromError("bad_payload", f"HTTP {status}: an HTML page, not the Prometheus "
                            "API (an auth proxy's login page? check the URL and credentials)",
                            status)
        if 300 <= status < 400:
            raise PromError("unauthorized" if "login" in resp.headers.get("location", "")
                            else "http_error",
                            f"HTTP {status}: redirected (an auth proxy? check the URL)", status)
        try:
            with gc_paused():
                body = orjson.loads(raw) if raw else None
        except ValueError:  # orjson.JSONDecodeError is a ValueError
            body = None
        if not isinstance(body, dict):
            if status == 404:
                raise PromError("not_found", f"HTTP 404: no such API at {self.display_url}",
                                status)
            snippet = " ".join(raw[:400].decode("utf-8", "replace").split())[:120]
            raise PromError("bad_payload" if status < 400 else "http_error",
                            f"HTTP {status}: not a Prometheus API answer: {snippet!r}", status)
        if body.get("status") == "success" and status < 400:
            return body
        etype = str(body.get("errorType") or "")
        msg = str(body.get("error") or f"HTTP {status}")
        if etype == "bad_data" or status == 400 or (
                status == 422 and any(w in msg for w in _PARSE_ERRORS)):
            raise PromError("bad_query", f"the server rejected the query: {msg}", status)
        if etype in ("execution", "timeout") or status in (422, 503):
            raise PromError("too_big", f"{msg} — try a narrower --match or a longer "
                            "--interval/window", status)
        if status == 404:
            raise PromError("not_found", f"HTTP 404: {msg}", status)
        raise PromError("http_error", f"HTTP {status}: {msg}", status)

    @staticmethod
    def _result(body: dict[str, Any]) -> PromResult:
        data = body.get("data")
        if not isinstance(data, dict):
            raise PromError("bad_payload", "the answer has no data object")
        result = data.get("result")
        if not isinstance(result, list):
            result = []
        warnings = [str(w) for w in body.get("warnings") or []]
        partial = bool(body.get("isPartial") or data.get("isPartial"))
        if partial and not warnings:
            warnings.append("the server answered with partial data (isPartial)")
        stats = body.get("stats") if isinstance(body.get("stats"), dict) else data.get("stats")
        return PromResult(str(data.get("resultType") or ""), result, warnings,
                          partial or bool(body.get("warnings")),
                          stats if isinstance(stats, dict) else None)

    async def query(self, expr: str, t: float, *, stats: bool = False) -> PromResult:
        """Instant query at unix time ``t``."""
        params = {"query": expr, "time": _fmt_time(t), "timeout": f"{self.cfg.timeout_s:g}s"}
        if stats:
            params["stats"] = "all"
        resp = await self._send("POST", "/api/v1/query", params)
        return self._result(self._envelope(resp))

    async def query_range(self, expr: str, start: float, end: float, step: float) -> PromResult:
        """Range query; ``start``/``end`` are aligned down to ``step`` and the point count is
        kept under the 11,000 the API allows (the start moves later when needed)."""
        step = max(1.0, float(step))
        end = math.floor(end / step) * step
        start = max(math.floor(start / step) * step, end - 10_999 * step)
        params = {"query": expr, "start": _fmt_time(start), "end": _fmt_time(end),
                  "step": f"{step:g}", "timeout": f"{self.cfg.timeout_s:g}s"}
        resp = await self._send("POST", "/api/v1/query_range", params)
        return self._result(self._envelope(resp))

    async def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET an API path (``/api/v1/targets``...) and return its envelope."""
        resp = await self._send("GET", path, params or {})
        body = self._envelope(resp)
        body.setdefault("_headers", {k.lower(): v for k, v in resp.headers.items()
                                     if k.lower() not in ("set-cookie", "authorization")})
        return body

    async def detect(self) -> Backend:
        """Which backend this is (config ``kind`` wins), from buildinfo and the URL."""
        if self.cfg.kind:
            return Backend(self.cfg.kind)
        path = urlsplit(self.base).path
        try:
            body = await self.get("/api/v1/status/buildinfo")
        except PromError as exc:
            if exc.kind in ("unreachable", "unauthorized", "bad_payload"):
                raise
            body = {}
        return backend_from_buildinfo(body, path)

    async def aclose(self) -> None:
        await self._client.aclose()


def backend_from_buildinfo(body: dict[str, Any], path: str = "") -> Backend:
    """Guess the backend from a buildinfo envelope (and the URL path)."""
    data = body.get("data") if isinstance(body.get("data"), dict) else {}
    version = data.get("version") if isinstance(data.get("version"), str) else None
    headers = body.get("_headers") or {}
    blob = json.dumps(data).lower()
    if "mimir" in blob or "cortex" in blob or (path.rstrip("/").endswith("/prometheus") \
            and "/select/" not in path):
        return Backend("mimir", version)
    if "thanos" in blob or (version or "").startswith("0."):
        return Backend("thanos", version)
    if "/select/" in path or not data or (version == "2.24.0" and "revision" not in data) \
            or "x-server-hostname" in headers:
        return Backend("victoriametrics", None if version == "2.24.0" else version)
    return Backend("prometheus", version)


def _fmt_time(t: float) -> str:
    return f"{t:.3f}".rstrip("0").rstrip(".")
