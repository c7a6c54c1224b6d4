"""Serve ``/metrics`` over HTTP (or HTTPS) in a thread of its own, with an optional token.

- Never waits on a target: it renders the latest view (``ExportState``) whatever the refresh
  loop is doing, so a hanging target cannot stall it.
- Threads, TLS, the bearer token, the loopback policy, the connection cap and the read
  timeout are the shared server's (``llmtop/httpserve.py``), as for the span receiver.
"""

from __future__ import annotations

import gzip
from collections.abc import Callable

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from llmtop.httpserve import Flags, Handler, Server, listen_policy

__all__ = ["DEFAULT_LISTEN", "EXPORT_FLAGS", "MetricsServer"]

DEFAULT_LISTEN = "127.0.0.1:9464"
EXPORT_FLAGS = Flags.named("--listen", "--listen", "Prometheus sends", "serve")
"""The exporter's options (``llmtop export`` and ``llmtop record --listen``)."""


def _handler(render: Callable[[], bytes]) -> type[Handler]:
    class MetricsHandler(Handler):
        server_version = "llmtop-exporter"

        def do_GET(self) -> None:
            if not self.authorized():
                return
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = render()
                except Exception as exc:  # a bug must not kill the server: say so, once
                    self.send(500, f"render failed: {type(exc).__name__}\n".encode())
                    return
                if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                    self.send(200, gzip.compress(body, 6), {"Content-Encoding": "gzip"},
                              CONTENT_TYPE_LATEST)
                else:
                    self.send(200, body, ctype=CONTENT_TYPE_LATEST)
            elif path == "/":
                self.send(200, b"llmtop exporter: see /metrics\n")
            else:
                self.send(404, b"not found\n")

    return MetricsHandler


class MetricsServer:
    """``/metrics`` on ``listen`` (``ADDR:PORT``) in a daemon thread; ``close()`` stops it."""

    def __init__(self, render: Callable[[], bytes], listen: str = DEFAULT_LISTEN, *,
                 token_file: str | None = None, no_auth: bool = False,
                 tls_cert: str | None = None, tls_key: str | None = None) -> None:
        _, where = listen_policy(EXPORT_FLAGS, {EXPORT_FLAGS.listen: listen},
                                 token_file=token_file, no_auth=no_auth, tls_cert=tls_cert,
                                 tls_key=tls_key)
        self._server = Server(where, _handler(render), name="llmtop-exporter-http",
                              flag=EXPORT_FLAGS.listen)
        self.host, self.port = self._server.host, self._server.port
        self.tls = self._server.tls
        self.authenticated = self._server.authenticated

    @property
    def url(self) -> str:
        return self._server.url("/metrics")

    def close(self) -> None:
        self._server.close()
