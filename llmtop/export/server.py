"""Serve ``/metrics`` over HTTP (or HTTPS) in a thread of its own, with an optional token.

The server never waits on a target: it renders the latest view (``ExportState``) whatever
the refresh loop is doing, so a hanging target cannot stall it. Loopback by default; any
other address only when given explicitly, and then with a token file unless ``no_auth``.
The token is compared in constant time and never printed, logged or served. With a
certificate (``tls_cert``) every connection is TLS, its handshake made in the connection's own
thread with a time limit, so a client that never finishes one cannot hold the others up.
"""

from __future__ import annotations

import gzip
import hmac
import ipaddress
import os
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from llmtop.errors import ConfigError

__all__ = ["DEFAULT_LISTEN", "MetricsServer", "TokenFile", "is_loopback", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:9464"


def parse_listen(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[::1]:PORT`` for IPv6; a bare ``PORT`` or ``:PORT`` is loopback)."""
    t = text.strip()
    host, sep, port = t.rpartition(":")
    if not sep:
        host, port = "", t
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(f"--listen {text!r}: want ADDR:PORT, e.g. 127.0.0.1:9464") from None
    if not 0 <= p <= 65535:
        raise ConfigError(f"--listen {text!r}: port out of range")
    return host, p


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TokenFile:
    """A bearer token read from a file, read again when the file changes."""

    def __init__(self, path: str) -> None:
        self.path = os.path.expanduser(path)
        self._mtime: float | None = None
        self._token = b""
        self.token()  # unreadable or empty: fail at start, not at the first scrape

    def token(self) -> bytes:
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as exc:
            if self._token:
                return self._token  # moved away for a moment: keep the last one
            raise ConfigError(f"--listen-token-file: cannot read {self.path}: "
                              f"{exc.strerror}") from None
        if mtime != self._mtime:
            with open(self.path, "rb") as f:
                tok = f.read().strip()
            if not tok:
                raise ConfigError(f"--listen-token-file: {self.path} is empty")
            self._token, self._mtime = tok, mtime
        return self._token

    def allows(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        try:
            want = self.token()
        except (ConfigError, OSError):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), want)


def _handler(render: Callable[[], bytes], token: TokenFile | None) -> type:
    class Handler(BaseHTTPRequestHandler):
        server_version = "llmtop-exporter"

        def do_GET(self) -> None:
            if token is not None and not token.allows(self.headers.get("Authorization")):
                self._send(401, b"unauthorized\n", "text/plain; charset=utf-8",
                           {"WWW-Authenticate": 'Bearer realm="llmtop"'})
                return
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = render()
                except Exception as exc:  # a bug must not kill the server: say so, once
                    self._send(500, f"render failed: {type(exc).__name__}\n".encode(),
                               "text/plain; charset=utf-8")
                    return
                if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                    self._send(200, gzip.compress(body, 6), CONTENT_TYPE_LATEST,
                               {"Content-Encoding": "gzip"})
                else:
                    self._send(200, body, CONTENT_TYPE_LATEST)
            elif path == "/":
                self._send(200, b"llmtop exporter: see /metrics\n", "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found\n", "text/plain; charset=utf-8")

        def _send(self, code: int, body: bytes, ctype: str,
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # no access log
            pass

    return Handler


HANDSHAKE_TIMEOUT_S = 10.0
"""A TLS client gets this long to finish its handshake and send its request."""


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    """A server context from a PEM certificate (chain) and key (``key`` None: in ``cert``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(os.path.expanduser(cert),
                            os.path.expanduser(key) if key else None)
    except (OSError, ssl.SSLError) as exc:
        why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        raise ConfigError(f"--listen-tls-cert {cert}: cannot load the certificate and key "
                          f"({why})") from None
    return ctx


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr: tuple[str, int], handler: type,
                 tls: ssl.SSLContext | None = None) -> None:
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        self.tls = tls
        super().__init__(addr, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:  # in this connection's thread: a slow handshake holds up no one else
            conn = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # plain HTTP or a failed handshake: the connection just closes
        try:
            super().finish_request(conn, client_address)
        finally:
            conn.close()


class MetricsServer:
    """``/metrics`` on ``host:port`` in a daemon thread; ``close()`` stops it."""

    def __init__(self, render: Callable[[], bytes], listen: str = DEFAULT_LISTEN, *,
                 token_file: str | None = None, no_auth: bool = False,
                 tls_cert: str | None = None, tls_key: str | None = None) -> None:
        host, port = parse_listen(listen)
        if tls_key and not tls_cert:
            raise ConfigError("--listen-tls-key needs --listen-tls-cert")
        tls = tls_context(tls_cert, tls_key) if tls_cert else None
        self.tls = tls is not None
        token = TokenFile(token_file) if token_file else None
        if not is_loopback(host) and token is None and not no_auth:
            raise ConfigError(
                f"--listen {listen}: not a loopback address; give --listen-token-file FILE "
                "(a bearer token Prometheus sends), or --listen-no-auth to serve anyone who "
                "can reach it")
        self.authenticated = token is not None
        try:
            self._httpd = _Server((host, port), _handler(render, token), tls)
        except OSError as exc:
            raise ConfigError(f"--listen {listen}: {exc.strerror or exc}") from None
        h, p = self._httpd.server_address[:2]
        self.host, self.port = str(h), int(p)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="llmtop-exporter-http", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        h = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{h}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)
