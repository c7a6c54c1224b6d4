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
``identify`` probes the identity endpoints in parallel (<= 1 s each, 256 KiB cap) and keeps
only whitelisted fields (SGLang's ``/server_info`` contains its ``api_key``: never copied).
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
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import ssl
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from llmtop import __version__
from llmtop.config import Config, Target
from llmtop.model import RawScrape
from llmtop.sources.plainhttp import PlainHTTPTransport

__all__ = [
    "IDENTITY_PATHS",
    "IDENTITY_TIMEOUT_S",
    "MODELS_IN_METRICS",
    "SAFE_HEADERS",
    "Scraper",
    "default_metrics_path",
    "engine_from_identity",
]

SAFE_HEADERS = ("process-start-time-unix",)
"""Response headers copied into ``RawScrape.headers`` (lower case)."""

IDENTITY_PATHS = (
    "/version", "/v1/models", "/v2", "/info", "/props", "/api/version", "/server_info",
)
IDENTITY_TIMEOUT_S = 1.0
IDENTITY_BODY_CAP = 256 * 1024
IDENTITY_RETRY_S = 30.0
"""After a failed scrape, identity is probed alongside scrapes at most this often."""
MODELS_IN_METRICS = frozenset({"vllm", "sglang", "triton", "lmdeploy", "ollama", "dcgm"})
"""Engines whose metrics name their models (labels, ``/api/ps``; DCGM has none): identity
adds only versions and limits, so with ``defer_identity`` it may follow the first sample."""

_OWNED_BY = {
    "vllm": "vllm",
    "sglang": "sglang",
    "llamacpp": "llamacpp",
    "tensorrt_llm": "trtllm",
    "lmdeploy": "lmdeploy",
}
_SGLANG_KEYS = (
    "version", "model_path", "served_model_name", "tp_size", "dp_size", "pp_size",
    "max_running_requests", "max_total_num_tokens", "context_length", "page_size",
    "chunked_prefill_size", "enable_metrics",
)
_TGI_KEYS = (
    "model_id", "model_sha", "model_dtype", "max_concurrent_requests", "max_input_tokens",
    "max_input_length", "max_total_tokens", "max_batch_total_tokens", "router", "version", "sha",
    "docker_label",
)
_LLAMACPP_KEYS = (
    "total_slots", "model_path", "build_info", "endpoint_metrics", "endpoint_slots", "n_ctx",
)
_MIB = 1024 * 1024

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    # httpcore runs ``import sniffio`` for every lock it sets up (several per request); when
    # it is not installed (recent anyio no longer needs it) each try searches sys.path on
    # disk again. A None entry makes that import fail at once, exactly as it would anyway.
    sys.modules["sniffio"] = None  # type: ignore[assignment]
_ACCEPT = "text/plain;version=0.0.4;q=0.9, application/json;q=0.8, */*;q=0.1"


def default_metrics_path(engine: str | None, identity: dict[str, Any] | None = None) -> str:
    """The metrics path for ``engine`` (``identity`` tells whether trtllm's Prometheus works)."""
    if engine == "ollama":
        return "/api/ps"
    if engine == "trtllm" and identity and identity.get("prometheus_metrics"):
        return "/prometheus/metrics"
    return "/metrics"


def engine_from_identity(ident: dict[str, Any] | None) -> str | None:
    """The engine id the identity endpoints make certain, or None."""
    if not ident:
        return None
    tri = ident.get("triton")
    if isinstance(tri, dict) and str(tri.get("name", "")).lower() == "triton":
        return "triton"
    ob = ident.get("owned_by")
    if isinstance(ob, str) and ob.lower() in _OWNED_BY:
        return _OWNED_BY[ob.lower()]
    tgi = ident.get("tgi")
    if isinstance(tgi, dict) and tgi.get("router") == "text-generation-router":
        return "tgi"
    if "ollama" in ident:
        return "ollama"
    if "llamacpp" in ident:
        return "llamacpp"
    return None


def _fmt_cap(n: int) -> str:
    return f"{n // _MIB} MiB" if n >= _MIB and n % _MIB == 0 else f"{n} bytes"


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _env_proxy(target: Target) -> str | None:
    """The proxy ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` name for a remote target, unless
    ``NO_PROXY`` covers its host (as curl and httpx read them); never for loopback."""
    if _is_loopback(target.host):
        return None
    proxies = urllib.request.getproxies()
    url = proxies.get(urlsplit(target.base_url).scheme or "http") or proxies.get("all")
    if not url or urllib.request.proxy_bypass(target.host):
        return None
    return url


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 10:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _connect_reason(exc: BaseException, host: str) -> str:
    for e in _chain(exc):
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, socket.gaierror):
            return f"DNS lookup failed for {host}"
        if isinstance(e, ssl.SSLCertVerificationError):
            return "TLS certificate verify failed (use --insecure to skip)"
        if isinstance(e, ssl.SSLError):
            return f"TLS error: {e.reason or e}"
        if isinstance(e, ConnectionResetError):
            return "connection reset"
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service" in text or "nodename" in text or "name resolution" in text:
        return f"DNS lookup failed for {host}"
    if "certificate" in text:
        return "TLS certificate verify failed (use --insecure to skip)"
    if "all connection attempts failed" in text:
        return "connection refused"
    return f"cannot connect: {str(exc) or type(exc).__name__}"[:200]


def _err_message(raw: bytes) -> str | None:
    """A short message from a JSON error body ({"error": {"message"}}, {"detail"}, ...)."""
    try:
        obj = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the stack
        return None
    msg: Any = None
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            msg = err.get("message")
        elif isinstance(err, str):
            msg = err
        msg = msg or obj.get("message") or obj.get("detail")
    if isinstance(msg, str) and msg.strip():
        return " ".join(msg.split())[:160]
    return None


@dataclass(slots=True)
class _Result:
    status: str
    http_status: int | None = None
    content_type: str | None = None
    body: str | None = None
    error: str | None = None
    headers: dict[str, str] | None = None


class _LazyTLSTransport(httpx.AsyncBaseTransport):
    """``http://`` over llmtop's lean ``PlainHTTPTransport`` (a tenth of httpcore's CPU per
    scrape); ``https://`` over httpx's own transport, whose SSL context (the certificate
    store: 30-50 ms of CPU to load) is built at the first https request."""

    def __init__(self, *, verify: bool, limits: httpx.Limits) -> None:
        self._verify = verify
        self._limits = limits
        self._plain = PlainHTTPTransport()
        self._tls: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "https":
            return await self._plain.handle_async_request(request)
        if self._tls is None:
            ctx = httpx.create_ssl_context(verify=self._verify, trust_env=True)
            self._tls = httpx.AsyncHTTPTransport(verify=ctx, http1=True, http2=False,
                                                 limits=self._limits)
        return await self._tls.handle_async_request(request)

    async def aclose(self) -> None:
        await self._plain.aclose()
        if self._tls is not None:
            await self._tls.aclose()


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
        self._transport = transport
        self._defer_identity = defer_identity
        """True: an ok scrape never waits for identity (see ``identity_pending``)."""
        self._clients: dict[tuple[bool, bool, str | None], httpx.AsyncClient] = {}
        self._state: dict[str, _State] = {}
        self._proxies: dict[str, str | None] = {}
        """``_env_proxy`` per target, read once (it scans the environment)."""
        self._lean: dict[httpx.AsyncClient, _LazyTLSTransport] = {}
        """The lean transport under each client that has one and no proxy."""
        self._direct: dict[tuple[str, tuple[tuple[str, str], ...]], httpx.Request | None] = {}
        """Prebuilt scrape requests for plain http (None: that URL redirects)."""

    # -- plumbing ------------------------------------------------------------------------
    def verify_for(self, target: Target) -> bool:
        """Whether TLS certificates are verified for ``target`` (on unless disabled)."""
        return bool(target.verify_tls and self._config.verify_tls)

    def _client(self, target: Target) -> httpx.AsyncClient:
        proxy = self._proxies.get(target.name, "")
        if proxy == "":
            proxy = self._proxies[target.name] = _env_proxy(target)
        key = (self.verify_for(target), _is_loopback(target.host), proxy)
        c = self._clients.get(key)
        if c is None:
            limits = httpx.Limits(
                max_connections=128, max_keepalive_connections=64, keepalive_expiry=30.0
            )
            lean = None if self._transport else _LazyTLSTransport(verify=key[0], limits=limits)
            c = httpx.AsyncClient(
                http1=True,
                http2=False,
                # SSL_CERT_FILE/SSL_CERT_DIR always count (here: for a proxy's transport, in
                # _LazyTLSTransport for the rest). httpx reads no proxy from the environment
                # when it is given a transport: _env_proxy does, for remote targets only.
                verify=key[0],
                trust_env=not key[1],
                proxy=proxy,
                timeout=httpx.Timeout(self._config.timeout_s),
                limits=limits,
                follow_redirects=True,
                max_redirects=3,
                transport=self._transport or lean,
                headers={"user-agent": f"llmtop/{__version__}", "accept": _ACCEPT},
            )
            self._clients[key] = c
            if lean is not None and proxy is None:
                self._lean[c] = lean
        return c

    @contextlib.asynccontextmanager
    async def _stream(self, target: Target, url: str, headers: dict[str, str]
                      ) -> AsyncIterator[httpx.Response]:
        """``client.stream("GET", ...)``; a plain-http URL with no proxy goes straight to the
        lean transport with a request built once, skipping httpx's client layer (URL merge,
        cookies, auth and redirect machinery: about a third of a scrape's CPU). A redirect
        sends that URL through the client from then on."""
        client = self._client(target)
        lean = self._lean.get(client)
        k = (url, tuple(headers.items()))
        req = self._direct.get(k, False) if lean is not None else None
        if req is False:
            req = None
            if url.startswith("http://"):
                req = client.build_request("GET", url, headers=headers)
            if len(self._direct) >= 256:
                self._direct.clear()
            self._direct[k] = req
        if req is not None and lean is not None:
            resp = await lean.handle_async_request(req)
            resp.request = req
            try:
                if not resp.has_redirect_location:
                    yield resp
                    return
            finally:
                await resp.aclose()
            self._direct[k] = None
        async with client.stream("GET", url, headers=headers) as resp:
            yield resp

    def _headers(self, target: Target) -> dict[str, str]:
        h = dict(target.headers)
        key = target.api_key or self._config.api_key
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def _ident_headers(self, target: Target) -> dict[str, str]:
        # Identity is asked once per process: its parallel connections are not kept in the
        # pool, where every later scrape would check each idle one.
        return {**self._headers(target), "Connection": "close"}

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

    # -- scraping ------------------------------------------------------------------------
    async def _get(self, target: Target, url: str, cap: int) -> _Result:
        in_body = False
        headers = self._headers(target)
        try:
            async with self._stream(target, url, headers) as resp:
                status = resp.status_code
                ctype = resp.headers.get("content-type")
                safe = {h: resp.headers[h] for h in SAFE_HEADERS if h in resp.headers}
                base = {"http_status": status, "content_type": ctype, "headers": safe or None}
                if status in (401, 403):
                    hint = ("the API key was refused" if "Authorization" in headers
                            else "set an API key")
                    return _Result(
                        "unauthorized", error=f"unauthorized (HTTP {status}) — {hint}", **base
                    )
                if not 200 <= status < 300:
                    msg = None
                    with contextlib.suppress(httpx.HTTPError):
                        head = b""
                        async for chunk in resp.aiter_bytes():
                            head += chunk
                            if len(head) >= 4096:
                                break
                        msg = _err_message(head[:4096])
                    err = f"HTTP {status}" + (f": {msg}" if msg else "")
                    return _Result("http_error", error=err, **base)
                if ctype and "text/html" in ctype.lower():
                    return _Result("bad_payload", error="HTML page", **base)
                try:
                    clen = int(resp.headers["content-length"])
                except (KeyError, ValueError):
                    clen = None
                if clen is not None and clen > cap:
                    return _Result("bad_payload", error=f"body over {_fmt_cap(cap)}", **base)
                in_body = True
                buf = bytearray()
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    if len(buf) > cap:
                        return _Result("bad_payload", error=f"body over {_fmt_cap(cap)}", **base)
                if (
                    clen is not None
                    and "content-encoding" not in resp.headers
                    and len(buf) != clen
                ):
                    return _Result("bad_payload", error="truncated body", **base)
                text = buf.decode("utf-8-sig", "replace")  # a BOM is not content
                if text[:256].lstrip().lower().startswith(("<!doctype", "<html")):
                    return _Result("bad_payload", error="HTML page", **base)
                return _Result("ok", body=text, **base)
        except httpx.TimeoutException:
            return _Result("down", error=f"timeout after {float(target.timeout_s)}s")
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if in_body:
                return _Result("bad_payload", error="truncated body")
            if isinstance(exc, httpx.ReadError) and any(
                isinstance(e, ConnectionResetError) for e in _chain(exc)
            ):
                return _Result("down", error="connection reset")
            if isinstance(exc, httpx.RemoteProtocolError) and "disconnect" not in str(exc):
                # it answered, but not in HTTP (h11: "illegal status line", ...)
                return _Result("down", error="invalid HTTP response (is this an HTTP port?)")
            return _Result("down", error="connection closed before a response")
        except httpx.DecodingError:
            return _Result("bad_payload", error="undecodable body (content encoding)")
        except httpx.TooManyRedirects:
            # the server is up and answering, only never with the metrics
            return _Result("http_error", error="redirect loop (more than 3 redirects)")
        except (httpx.ConnectError, OSError) as exc:
            return _Result("down", error=_connect_reason(exc, target.host))
        except httpx.HTTPError as exc:
            return _Result("down", error=f"{type(exc).__name__}: {exc}"[:200])
        except Exception as exc:  # never raise out of a scrape
            return _Result("down", error=f"error: {type(exc).__name__}")

    async def _fetch(self, target: Target, url: str) -> tuple[_Result, float]:
        start = time.monotonic()
        try:
            res = await asyncio.wait_for(
                self._get(target, url, self._config.body_cap_bytes), target.timeout_s
            )
        except asyncio.TimeoutError:
            res = _Result("down", error=f"timeout after {float(target.timeout_s)}s")
        return res, time.monotonic() - start

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
                t_wall=time.time(),
                t_mono=time.monotonic(),
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
            res, elapsed = await self._fetch(target, url)
            if res.status == "ok":
                st.ident_task = task
            else:
                ident = await task
        elif want_ident:
            (res, elapsed), ident = await asyncio.gather(
                self._fetch(target, url), self._probe_identity(target, st)
            )
            if self.metrics_url(target) != url:
                # identity changed the path (trtllm, ollama: whose /metrics is a 404)
                url = self.metrics_url(target)
                res, elapsed = await self._fetch(target, url)
        else:
            res, elapsed = await self._fetch(target, url)

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
            netloc = f"[{host}]:8002" if ":" in host else f"{host}:8002"
            alt = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
            res2, el2 = await self._fetch(target, alt)
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
            t_wall=time.time(),
            t_mono=time.monotonic(),
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

    async def _probe_identity(self, target: Target, st: _State) -> dict[str, Any]:
        """``identify`` and keep the answer when anything answered (besides ``host``)."""
        st.ident_tried = time.monotonic()
        ident = await self.identify(target)
        if len(ident) > 1:
            st.identity = ident
            st.ident_pending = True
        return ident

    # -- identity ------------------------------------------------------------------------
    async def _get_json(self, target: Target, path: str, timeout: float) -> tuple[int, Any]:
        """(HTTP status, parsed JSON or None); (0, None) on any failure."""
        client = self._client(target)
        url = target.base_url.rstrip("/") + path

        async def go() -> tuple[int, Any]:
            async with client.stream("GET", url, headers=self._ident_headers(target)) as resp:
                if resp.status_code != 200:
                    return resp.status_code, None
                buf = bytearray()
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    if len(buf) > IDENTITY_BODY_CAP:
                        return resp.status_code, None
                try:
                    return 200, json.loads(buf.decode("utf-8", "replace"))
                except ValueError:
                    return 200, None

        try:
            return await asyncio.wait_for(go(), timeout)
        except asyncio.CancelledError:
            raise
        except Exception:
            return 0, None

    async def _status_of(self, target: Target, path: str, timeout: float) -> int:
        client = self._client(target)
        url = target.base_url.rstrip("/") + path

        async def go() -> int:
            async with client.stream("GET", url, headers=self._ident_headers(target)) as resp:
                return resp.status_code

        try:
            return await asyncio.wait_for(go(), timeout)
        except asyncio.CancelledError:
            raise
        except Exception:
            return 0

    async def identify(self, target: Target) -> dict[str, Any]:
        """Ask the identity endpoints in parallel; returns what answered (never raises).

        Keys (each only when answered): ``version``, ``owned_by``, ``models``,
        ``max_model_len``, ``triton`` {name, version, extensions}, ``tgi`` {model_id,
        version, router, ...}, ``llamacpp`` {total_slots, build_info, endpoint_metrics, ...},
        ``ollama`` {version}, ``sglang`` {version, model_path, tp_size, ...},
        ``prometheus_metrics`` (trtllm: ``/prometheus/metrics`` answered 200), ``engine``
        (when the answers make it certain) and always ``host``.
        """
        ident: dict[str, Any] = {"host": target.host}
        if target.engine == "dcgm":
            return ident
        timeout = min(IDENTITY_TIMEOUT_S, target.timeout_s)
        try:
            answers = await asyncio.gather(
                *(self._get_json(target, p, timeout) for p in IDENTITY_PATHS)
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # pragma: no cover - _get_json never raises
            return ident
        pairs = zip(IDENTITY_PATHS, answers, strict=True)
        got = {p: body for p, (code, body) in pairs if code == 200}
        versions: list[str] = []

        v = got.get("/version")
        if isinstance(v, dict) and isinstance(v.get("version"), (str, int, float)):
            versions.append(str(v["version"]))
        models = got.get("/v1/models")
        if isinstance(models, dict) and isinstance(models.get("data"), list):
            data = [d for d in models["data"] if isinstance(d, dict)]
            ids = [str(d["id"]) for d in data if "id" in d]
            if ids:
                ident["models"] = ids
            owners = [d.get("owned_by") for d in data if isinstance(d.get("owned_by"), str)]
            if owners:
                ident["owned_by"] = owners[0]
            mml = [d.get("max_model_len") for d in data if isinstance(d.get("max_model_len"), int)]
            if mml:
                ident["max_model_len"] = mml[0]
        s = got.get("/server_info")
        if isinstance(s, dict) and ("version" in s or "model_path" in s):
            sub = {k: s[k] for k in _SGLANG_KEYS if isinstance(s.get(k), (str, int, float, bool))}
            if sub:
                ident["sglang"] = sub
                if isinstance(sub.get("version"), str):
                    versions.append(sub["version"])
        info = got.get("/info")
        if isinstance(info, dict) and ("model_id" in info or "router" in info):
            sub = {k: info[k] for k in _TGI_KEYS if isinstance(info.get(k), (str, int, float))}
            ident["tgi"] = sub
            if isinstance(sub.get("version"), str):
                versions.append(sub["version"])
        tri = got.get("/v2")
        if isinstance(tri, dict) and isinstance(tri.get("name"), str):
            ident["triton"] = {
                "name": tri["name"],
                "version": str(tri.get("version")) if tri.get("version") is not None else None,
                "extensions": [str(x) for x in tri.get("extensions", []) if isinstance(x, str)]
                if isinstance(tri.get("extensions"), list)
                else [],
            }
            if ident["triton"]["version"]:
                versions.append(ident["triton"]["version"])
        ov = got.get("/api/version")
        if isinstance(ov, dict) and isinstance(ov.get("version"), str):
            ident["ollama"] = {"version": ov["version"]}
            versions.append(ov["version"])
        props = got.get("/props")
        if isinstance(props, dict) and ("total_slots" in props or "build_info" in props):
            sub = {
                k: props[k]
                for k in _LLAMACPP_KEYS
                if isinstance(props.get(k), (str, int, float, bool))
            }
            ident["llamacpp"] = sub
            if isinstance(sub.get("build_info"), str):
                versions.append(sub["build_info"])
        if versions:
            ident["version"] = versions[0]
        engine = target.engine or engine_from_identity(ident)
        if engine == "trtllm":
            code = await self._status_of(target, "/prometheus/metrics", timeout)
            ident["prometheus_metrics"] = code == 200
        found = engine_from_identity(ident)
        if found:
            ident["engine"] = found
        return ident

    async def aclose(self) -> None:
        """Stop identity still being asked and close every connection."""
        tasks = [st.ident_task for st in self._state.values() if st.ident_task is not None]
        for st in self._state.values():
            st.ident_task = None
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            with contextlib.suppress(Exception):
                await c.aclose()
