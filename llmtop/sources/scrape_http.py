"""HTTP for the scraper: shared clients, the lean plain-http path, and one GET read into a
classified ``_Result`` (``ok``, ``down``, ``http_error``, ``unauthorized``, ``bad_payload``;
see ``sources.scrape`` for the rules). Never raises out of ``HttpFetcher.fetch``.
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
from urllib.parse import urlsplit

import httpx

from llmtop import __version__
from llmtop.config import Config, Target
from llmtop.sources.plainhttp import PlainHTTPTransport
from llmtop.urls import is_loopback

__all__ = ["IDENTITY_BODY_CAP", "SAFE_HEADERS", "HttpFetcher", "connect_reason", "env_proxy"]

SAFE_HEADERS = ("process-start-time-unix",)
"""Response headers copied into ``RawScrape.headers`` (lower case)."""
IDENTITY_BODY_CAP = 256 * 1024
"""The most an identity endpoint's JSON may hold."""
_MIB = 1024 * 1024

_timeout = getattr(asyncio, "timeout", None)
"""``asyncio.timeout`` (Python 3.11+), else None: ``fetch`` falls back to ``wait_for``."""

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    # httpcore runs ``import sniffio`` for every lock it sets up (several per request); when
    # it is not installed (recent anyio no longer needs it) each try searches sys.path on
    # disk again. A None entry makes that import fail at once, exactly as it would anyway.
    sys.modules["sniffio"] = None  # type: ignore[assignment]
_ACCEPT = "text/plain;version=0.0.4;q=0.9, application/json;q=0.8, */*;q=0.1"


def _fmt_cap(n: int) -> str:
    return f"{n // _MIB} MiB" if n >= _MIB and n % _MIB == 0 else f"{n} bytes"


def env_proxy(target: Target) -> str | None:
    """The proxy ``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` name for a remote target, unless
    ``NO_PROXY`` covers its host (as curl and httpx read them); never for loopback."""
    if is_loopback(target.host):
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


def connect_reason(exc: BaseException, host: str) -> str:
    """Why a connection to ``host`` failed, in words (refused, DNS, TLS, reset...)."""
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


class HttpFetcher:
    """Connections and GETs of one ``Scraper``: one shared ``httpx.AsyncClient`` per
    (TLS-verify, loopback, proxy), the bearer token and configured headers on every request."""

    def __init__(self, config: Config, transport: httpx.AsyncBaseTransport | None) -> None:
        self._config = config
        self._transport = transport
        self._clients: dict[tuple[bool, bool, str | None], httpx.AsyncClient] = {}
        self._proxies: dict[str, str | None] = {}
        """``env_proxy`` per target, read once (it scans the environment)."""
        self._lean: dict[httpx.AsyncClient, _LazyTLSTransport] = {}
        """The lean transport under each client that has one and no proxy."""
        self._direct: dict[tuple[str, tuple[tuple[str, str], ...]], httpx.Request | None] = {}
        """Prebuilt scrape requests for plain http (None: that URL redirects)."""

    def verify_for(self, target: Target) -> bool:
        """Whether TLS certificates are verified for ``target`` (on unless disabled)."""
        return bool(target.verify_tls and self._config.verify_tls)

    def client(self, target: Target) -> httpx.AsyncClient:
        proxy = self._proxies.get(target.name, "")
        if proxy == "":
            proxy = self._proxies[target.name] = env_proxy(target)
        key = (self.verify_for(target), is_loopback(target.host), proxy)
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
    async def stream(self, target: Target, url: str, headers: dict[str, str]
                      ) -> AsyncIterator[httpx.Response]:
        """``client.stream("GET", ...)``; a plain-http URL with no proxy goes straight to the
        lean transport with a request built once, skipping httpx's client layer (URL merge,
        cookies, auth and redirect machinery: about a third of a scrape's CPU). A redirect
        sends that URL through the client from then on."""
        client = self.client(target)
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

    def headers(self, target: Target) -> dict[str, str]:
        h = dict(target.headers)
        key = target.api_key or self._config.api_key
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def ident_headers(self, target: Target) -> dict[str, str]:
        # Identity is asked once per process: its parallel connections are not kept in the
        # pool, where every later scrape would check each idle one.
        return {**self.headers(target), "Connection": "close"}

    async def get(self, target: Target, url: str, cap: int) -> _Result:
        in_body = False
        headers = self.headers(target)
        try:
            async with self.stream(target, url, headers) as resp:
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
            return _Result("down", error=connect_reason(exc, target.host))
        except httpx.HTTPError as exc:
            return _Result("down", error=f"{type(exc).__name__}: {exc}"[:200])
        except Exception as exc:  # never raise out of a scrape
            return _Result("down", error=f"error: {type(exc).__name__}")

    async def fetch(self, target: Target, url: str, cap: int | None = None
                    ) -> tuple[_Result, float]:
        """One GET within the target's timeout; ``cap``: body bytes at most (default: the
        config's ``body_cap_bytes``)."""
        start = time.monotonic()
        cap = self._config.body_cap_bytes if cap is None else cap
        try:
            if _timeout is not None:  # 3.11+: in this task (wait_for makes one per GET)
                async with _timeout(target.timeout_s):
                    res = await self.get(target, url, cap)
            else:
                res = await asyncio.wait_for(self.get(target, url, cap), target.timeout_s)
        except asyncio.TimeoutError:
            res = _Result("down", error=f"timeout after {float(target.timeout_s)}s")
        return res, time.monotonic() - start

    async def get_json(self, target: Target, path: str, timeout: float) -> tuple[int, Any]:
        """(HTTP status, parsed JSON or None); (0, None) on any failure."""
        client = self.client(target)
        url = target.base_url.rstrip("/") + path

        async def go() -> tuple[int, Any]:
            async with client.stream("GET", url, headers=self.ident_headers(target)) as resp:
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

    async def status_of(self, target: Target, path: str, timeout: float) -> int:
        client = self.client(target)
        url = target.base_url.rstrip("/") + path

        async def go() -> int:
            async with client.stream("GET", url, headers=self.ident_headers(target)) as resp:
                return resp.status_code

        try:
            return await asyncio.wait_for(go(), timeout)
        except asyncio.CancelledError:
            raise
        except Exception:
            return 0

    async def aclose(self) -> None:
        """Close every connection."""
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            with contextlib.suppress(Exception):
                await c.aclose()
