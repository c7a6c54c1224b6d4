"""One HTTP(S) server for every face that listens (``/metrics``, ``/v1/traces``).

- Threads: each connection in a daemon thread of its own; ``close()`` stops it all.
- Connection cap: at most ``max_connections`` at once; more are closed unanswered.
- Read timeout: a client that stops sending (half a request, a stalled TLS handshake) is
  dropped after ``read_timeout_s``.
- TLS: with a certificate every connection is TLS, its handshake made in the connection's
  own thread, so a client that never finishes one holds no one else up.
- Bearer token: read from a file (re-read when it changes), compared in constant time, never
  printed, logged or served; a request without it is answered 401.
- Listen policy: loopback by default; any other address only when given explicitly, and
  then with a token file unless the face's ``--…-no-auth`` is given.

``Flags`` names one face's command-line options, so every message names the flag the user
typed; ``cli/listen.py`` adds the same options to each face's parser.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from llmtop.errors import ConfigError
from llmtop.urls import is_loopback, netloc

__all__ = ["MAX_CONNECTIONS", "READ_TIMEOUT_S", "Flags", "Handler", "Listen", "Server",
           "TokenFile", "listen_policy", "parse_listen", "tls_context"]

MAX_CONNECTIONS = 32
"""Connections served at once; more are closed unanswered."""
READ_TIMEOUT_S = 10.0
"""A client gets this long for each read (its TLS handshake, each part of its request)."""


@dataclass(frozen=True)
class Flags:
    """One face's listen options, as the user types them (the exporter's ``--listen``…, the
    receiver's ``--otlp-listen``…)."""

    listen: str
    token_file: str
    no_auth: str
    tls_cert: str
    tls_key: str
    sender: str
    """Who sends the token, for the policy's message ("Prometheus sends", "the engines
    send")."""
    serves: str
    """What the face does for whoever reaches it ("serve", "take spans from")."""

    @classmethod
    def named(cls, listen: str, prefix: str, sender: str, serves: str) -> Flags:
        """``listen`` and ``<prefix>-token-file``, ``-no-auth``, ``-tls-cert``, ``-tls-key``."""
        return cls(listen, f"{prefix}-token-file", f"{prefix}-no-auth", f"{prefix}-tls-cert",
                   f"{prefix}-tls-key", sender, serves)


def parse_listen(text: str, flag: str = "--listen") -> tuple[str, int]:
    """``ADDR:PORT`` (``[::1]:PORT`` for IPv6; a bare ``PORT`` or ``:PORT`` is loopback)."""
    t = text.strip()
    host, sep, port = t.rpartition(":")
    if not sep:
        host, port = "", t
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: want ADDR:PORT, e.g. 127.0.0.1:9464") from None
    if not 0 <= p <= 65535:
        raise ConfigError(f"{flag} {text!r}: port out of range")
    return host, p


class TokenFile:
    """A bearer token read from a file, read again when the file changes."""

    def __init__(self, path: str, flag: str = "--listen-token-file") -> None:
        self.path = os.path.expanduser(path)
        self.flag = flag
        self._mtime: float | None = None
        self._token = b""
        self.token()  # unreadable or empty: fail at start, not at the first request

    def token(self) -> bytes:
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError as exc:
            if self._token:
                return self._token  # moved away for a moment: keep the last one
            raise ConfigError(f"{self.flag}: cannot read {self.path}: "
                              f"{exc.strerror}") from None
        if mtime != self._mtime:
            with open(self.path, "rb") as f:
                tok = f.read().strip()
            if not tok:
                raise ConfigError(f"{self.flag}: {self.path} is empty")
            self._token, self._mtime = tok, mtime
        return self._token

    def allows(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token."""
        if not header or not header.startswith("Bearer "):
            return False
        try:
            want = self.token()
        except (ConfigError, OSError):
            return False
        return hmac.compare_digest(header[7:].strip().encode(), want)


def tls_context(cert: str, key: str | None, flag: str = "--listen-tls-cert") -> ssl.SSLContext:
    """A server context from a PEM certificate (chain) and key (``key`` None: in ``cert``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(os.path.expanduser(cert),
                            os.path.expanduser(key) if key else None)
    except (OSError, ssl.SSLError) as exc:
        why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        raise ConfigError(f"{flag} {cert}: cannot load the certificate and key "
                          f"({why})") from None
    return ctx


@dataclass(frozen=True)
class Listen:
    """Where and how a face serves, once its options passed the policy."""

    host: str
    port: int
    allows: Callable[[str | None], bool] | None = None
    """Checks a request's ``Authorization`` header (``TokenFile.allows``); None: anyone."""
    tls: ssl.SSLContext | None = None


def listen_policy(flags: Flags, addresses: dict[str, str | None], *,
                  token_file: str | None, no_auth: bool, tls_cert: str | None,
                  tls_key: str | None) -> tuple[dict[str, tuple[str, int]], Listen]:
    """Check one face's options: each address in ``addresses`` (flag → ``ADDR:PORT`` or None)
    parsed, loopback unless a token or ``no_auth`` is given, the key only with a certificate.
    Returns the parsed addresses (by flag) and a ``Listen`` on ``flags.listen``'s address
    (``127.0.0.1:0`` when it is not given). Raises ``ConfigError``."""
    if tls_key and not tls_cert:
        raise ConfigError(f"{flags.tls_key} needs {flags.tls_cert}")
    token = TokenFile(token_file, flags.token_file) if token_file else None
    parsed = {flag: parse_listen(addr, flag) for flag, addr in addresses.items() if addr}
    for flag, (host, _port) in parsed.items():
        if not is_loopback(host) and token is None and not no_auth:
            raise ConfigError(
                f"{flag} {addresses[flag]}: not a loopback address; give {flags.token_file} "
                f"FILE (a bearer token {flags.sender}), or {flags.no_auth} to "
                f"{flags.serves} anyone who can reach it")
    tls = tls_context(tls_cert, tls_key, flags.tls_cert) if tls_cert else None
    host, port = parsed.get(flags.listen, ("127.0.0.1", 0))
    return parsed, Listen(host, port, token.allows if token else None, tls)


class Handler(BaseHTTPRequestHandler):
    """The base of each face's request handler: no access log, the token check, ``send``."""

    server: Server

    def authorized(self) -> bool:
        """True when no token is asked for or the request carries it; else answers 401
        (after ``refused``)."""
        allows = self.server.listen.allows
        if allows is None or allows(self.headers.get("Authorization")):
            return True
        self.refused()
        self.send(401, b"unauthorized\n", {"WWW-Authenticate": 'Bearer realm="llmtop"'})
        return False

    def refused(self) -> None:
        """Called before a request without the token is answered 401 (to count it)."""

    def send(self, code: int, body: bytes, headers: dict[str, str] | None = None,
             ctype: str = "text/plain; charset=utf-8") -> None:
        """Answer ``code`` with ``body``; an error closes the connection. A client that went
        away is not an error of the server's."""
        with contextlib.suppress(OSError):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            if code >= 400:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # no access log
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, listen: Listen, handler: type[Handler], max_connections: int,
                 read_timeout_s: float) -> None:
        if ":" in listen.host:
            self.address_family = socket.AF_INET6
        self.listen = listen
        self.read_timeout_s = read_timeout_s
        self.slots = threading.BoundedSemaphore(max_connections)
        super().__init__((listen.host, listen.port), handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):  # too many at once: close, unanswered
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started to give it back
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(self.read_timeout_s)
        if self.listen.tls is None:
            super().finish_request(request, client_address)
            return
        try:  # in this connection's thread: a slow handshake holds up no one else
            conn = self.listen.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            return  # plain HTTP or a failed handshake: the connection just closes
        try:
            super().finish_request(conn, client_address)
        finally:
            conn.close()


class Server:
    """``handler`` served on ``listen`` in a daemon thread; ``close()`` stops it.

    ``flag`` names the address option in the message when it cannot listen there."""

    def __init__(self, listen: Listen, handler: type[Handler], *, name: str,
                 flag: str = "--listen", max_connections: int = MAX_CONNECTIONS,
                 read_timeout_s: float = READ_TIMEOUT_S) -> None:
        try:
            self._httpd = _HTTPServer(listen, handler, max_connections, read_timeout_s)
        except OSError as exc:
            raise ConfigError(f"{flag} {listen.host}:{listen.port}: "
                              f"{exc.strerror or exc}") from None
        h, p = self._httpd.server_address[:2]
        self.host, self.port = str(h), int(p)
        self.tls = listen.tls is not None
        self.authenticated = listen.allows is not None
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,),
                                        name=name, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        """``http(s)://host:port`` and ``path``."""
        return f"{'https' if self.tls else 'http'}://{netloc(self.host, self.port)}{path}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5.0)
