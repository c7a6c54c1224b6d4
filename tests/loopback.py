"""A loopback HTTP server for tests that stand in for an engine or a router: each path
answers what its route says, and every request is counted."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Route", "serve"]

Route = Callable[[int], tuple[int, str, str]]
"""n (the requests to this path before this one) -> (status, content type, body)."""


@contextlib.contextmanager
def serve(routes: dict[str, Route]) -> Iterator[tuple[int, dict[str, int]]]:
    """A server on 127.0.0.1: GET ``path`` answers ``routes[path](n)``, any other path 404.
    Yields (port, hits): hits counts the requests per path, answered or not."""
    hits: dict[str, int] = {}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            with lock:
                n = hits.get(path, 0)
                hits[path] = n + 1
            route = routes.get(path)
            if route is None:
                self.send_error(404)
                return
            status, ctype, body = route(n)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
