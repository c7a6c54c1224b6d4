"""When a bake-off or tune trial calls an engine it started ready (``wait_ready``), against a
loopback HTTP server that answers as the engines do."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmtop.loadgen.engines import LaunchError, wait_ready


class _Engine:
    """``/health`` answers ``health_codes`` in turn (then its last one; None: 404), and
    ``/v1/models`` lists a model from its ``models_after``-th call on."""

    def __init__(self, health_codes: list[int] | None, models_after: int = 0) -> None:
        self.health_codes = health_codes
        self.models_after = models_after
        self.calls = {"/health": 0, "/v1/models": 0}


@pytest.fixture
def engine() -> Iterator[tuple[_Engine, str]]:
    state = _Engine(None)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            st = state
            if self.path in st.calls:
                st.calls[self.path] += 1
            if self.path == "/health" and st.health_codes is not None:
                codes = st.health_codes
                code = codes[min(st.calls["/health"], len(codes)) - 1]
                body = b""
            elif self.path == "/v1/models":
                code = 200
                data = ([{"id": "m", "object": "model"}]
                        if st.calls["/v1/models"] > st.models_after else [])
                body = json.dumps({"object": "list", "data": data}).encode()
            else:
                code, body = 404, b""
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield state, f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_503_from_health_is_not_ready_whatever_v1_models_says(engine):
    """SGLang lists its model at once but answers /health 503 until its own warm-up request
    has run: calling it ready then put the warm-up's tokens inside the first measured run."""
    st, url = engine
    st.health_codes = [503, 503, 503, 200]
    wait_ready(url, timeout_s=30)
    assert st.calls["/health"] == 4  # ready only at the 200


def test_without_health_a_listed_model_is_ready(engine):
    st, url = engine
    st.models_after = 2  # vLLM-like servers list nothing for a moment
    wait_ready(url, timeout_s=30)
    assert st.calls["/v1/models"] == 3 and st.calls["/health"] == 3


def test_a_health_that_stays_503_is_not_ready_in_time(engine):
    st, url = engine
    st.health_codes = [503]
    with pytest.raises(LaunchError, match="not ready after"):
        wait_ready(url, timeout_s=1.0)
    assert st.calls["/v1/models"] == 0  # never asked past the 503
