"""llmtop/httpserve.py: the one server of the exporter and the span receiver.

Its connection cap, read timeout, TLS, bearer token and loopback policy, each on the shared
``Server`` and on both faces that use it (``MetricsServer``, ``OtlpReceiver``).
"""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from llmtop.errors import ConfigError
from llmtop.export.server import EXPORT_FLAGS, MetricsServer
from llmtop.httpserve import (
    MAX_CONNECTIONS,
    Flags,
    Handler,
    Listen,
    Server,
    TokenFile,
    listen_policy,
    tls_context,
)
from llmtop.sources.otlp import OTLP_FLAGS, OtlpReceiver
from tests.spans.spanfix import bodies

PB = {"Content-Type": "application/x-protobuf"}


class Hello(Handler):
    def do_GET(self) -> None:
        if self.authorized():
            self.send(200, b"hello\n")


def _serve(**kw) -> Server:
    listen = kw.pop("listen", Listen("127.0.0.1", 0))
    return Server(listen, Hello, name="test-httpserve", **kw)


def _idle(srv_host: str, port: int, n: int) -> list[socket.socket]:
    """``n`` connections that send nothing (each holds one of the server's threads)."""
    return [socket.create_connection((srv_host, port), timeout=10) for _ in range(n)]


def _closed_unanswered(host: str, port: int) -> bool:
    """Whether the server closes a new connection without a word (the cap is reached)."""
    with socket.create_connection((host, port), timeout=10) as s:
        try:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return s.recv(100) == b""
        except ConnectionResetError:
            return True


def _served_again(url: str, **kw) -> bool:
    """Once a held connection is let go its thread ends and its place is free: poll for
    that (the thread's end is not observable from here)."""
    for _ in range(200):
        try:
            if httpx.get(url, timeout=5, **kw).status_code < 500:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    return False


def test_the_connection_cap_closes_the_one_over_it_and_frees_a_place_when_one_leaves():
    srv = _serve(max_connections=3, read_timeout_s=30.0)
    held = _idle(srv.host, srv.port, 3)
    try:
        assert _closed_unanswered(srv.host, srv.port)
        held.pop().close()
        assert _served_again(srv.url("/"))
        assert httpx.get(srv.url("/"), timeout=5).text == "hello\n"
    finally:
        for s in held:
            s.close()
        srv.close()


@pytest.mark.parametrize("face", ["exporter", "receiver"])
def test_both_faces_keep_the_cap(face):
    if face == "exporter":
        srv = MetricsServer(lambda: b"", "127.0.0.1:0")
        url = srv.url
    else:
        srv = OtlpReceiver("127.0.0.1", 0)
        url = srv.url
    held = _idle(srv.host, srv.port, MAX_CONNECTIONS)
    try:
        assert _closed_unanswered(srv.host, srv.port)
        held.pop().close()
        assert _served_again(url)
    finally:
        for s in held:
            s.close()
        srv.close()


def test_half_a_request_is_dropped_after_the_read_timeout():
    srv = _serve(read_timeout_s=0.3)
    try:
        with socket.create_connection((srv.host, srv.port), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            assert s.recv(100) == b""  # closed by the server, long before our own timeout
        assert httpx.get(srv.url("/"), timeout=5).status_code == 200
    finally:
        srv.close()


def test_the_receiver_drops_a_body_that_stops_coming():
    rx = OtlpReceiver("127.0.0.1", 0, read_timeout_s=0.3)
    try:
        with socket.create_connection((rx.host, rx.port), timeout=10) as s:
            s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/x-protobuf\r\nContent-Length: 5000\r\n\r\nabc")
            assert s.recv(100) == b""
        st = rx.stats()
        assert st["truncated"] == 1 and st["pending_bytes"] == 0  # its bytes given back
    finally:
        rx.close()


def test_a_token_is_asked_for_and_refusals_are_counted_by_the_face(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret\n")
    srv = _serve(listen=Listen("127.0.0.1", 0, TokenFile(str(tok)).allows))
    try:
        r = httpx.get(srv.url("/"), timeout=5)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        bad = httpx.get(srv.url("/"), headers={"Authorization": "Bearer nope"}, timeout=5)
        assert bad.status_code == 401
        good = httpx.get(srv.url("/"), headers={"Authorization": "Bearer s3cret"}, timeout=5)
        assert good.status_code == 200 and "s3cret" not in good.text
    finally:
        srv.close()


def test_loopback_unless_told():
    flags = Flags.named("--x-listen", "--x", "the tests send", "serve")
    parsed, where = listen_policy(flags, {"--x-listen": "9464"}, token_file=None,
                                  no_auth=False, tls_cert=None, tls_key=None)
    assert parsed == {"--x-listen": ("127.0.0.1", 9464)}
    assert (where.host, where.port, where.allows, where.tls) == ("127.0.0.1", 9464, None, None)
    _, unset = listen_policy(flags, {"--x-listen": None}, token_file=None, no_auth=False,
                             tls_cert=None, tls_key=None)
    assert (unset.host, unset.port) == ("127.0.0.1", 0)
    for addr in ("0.0.0.0:9464", "[::]:9464", "10.1.2.3:80"):
        with pytest.raises(ConfigError, match=r"--x-token-file FILE .*--x-no-auth"):
            listen_policy(flags, {"--x-listen": addr}, token_file=None, no_auth=False,
                          tls_cert=None, tls_key=None)
    _, anyone = listen_policy(flags, {"--x-listen": "0.0.0.0:0"}, token_file=None,
                              no_auth=True, tls_cert=None, tls_key=None)
    assert anyone.host == "0.0.0.0" and anyone.allows is None
    with pytest.raises(ConfigError, match="--x-tls-key needs --x-tls-cert"):
        listen_policy(flags, {"--x-listen": "9464"}, token_file=None, no_auth=False,
                      tls_cert=None, tls_key="k.pem")


def test_each_face_names_its_own_flags():
    assert (EXPORT_FLAGS.listen, EXPORT_FLAGS.token_file, EXPORT_FLAGS.tls_key) == (
        "--listen", "--listen-token-file", "--listen-tls-key")
    assert (OTLP_FLAGS.listen, OTLP_FLAGS.no_auth, OTLP_FLAGS.tls_cert) == (
        "--otlp-listen", "--otlp-no-auth", "--otlp-tls-cert")


def _trust(crt: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(crt))


def test_tls_serving_and_a_stalled_handshake_holds_no_one_up(cert):
    crt, key = cert
    srv = _serve(listen=Listen("127.0.0.1", 0, tls=tls_context(str(crt), str(key))),
                 read_timeout_s=30.0)
    try:
        assert srv.url("/").startswith("https://")
        stalled = socket.create_connection((srv.host, srv.port))  # never says hello
        try:
            r = httpx.get(srv.url("/"), verify=_trust(crt), timeout=5)
            assert r.status_code == 200 and r.text == "hello\n"
        finally:
            stalled.close()
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port: closed
            httpx.get(srv.url("/").replace("https://", "http://"), timeout=5)
    finally:
        srv.close()


def test_the_receiver_over_tls(cert):
    crt, key = cert
    rx = OtlpReceiver("127.0.0.1", 0, tls=tls_context(str(crt), str(key)))
    try:
        assert rx.url.startswith("https://127.0.0.1:")
        [b] = bodies("requests")
        r = httpx.post(rx.url, content=b, headers=PB, verify=_trust(crt), timeout=5)
        assert r.status_code == 200
        [got] = rx.drain()
        assert len(got.spans) == 3
        with pytest.raises(httpx.HTTPError):
            httpx.post(rx.url.replace("https://", "http://"), content=b, headers=PB, timeout=5)
        assert rx.drain() == []
    finally:
        rx.close()


def _flags(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_every_face_that_listens_has_the_options_users_know():
    from llmtop.cli import export, record
    from llmtop.cli.monitor import build_parser

    otlp = {"--otlp-listen", "--otlp-grpc-listen", "--otlp-token-file", "--otlp-no-auth",
            "--otlp-tls-cert", "--otlp-tls-key"}
    metrics = {"--listen", "--listen-token-file", "--listen-no-auth", "--listen-tls-cert",
               "--listen-tls-key"}
    tui = build_parser()
    assert otlp <= _flags(tui) and not metrics & _flags(tui)
    assert otlp | metrics <= _flags(export.build_parser(build_parser()))
    assert otlp | metrics <= _flags(record._record_parser())
    exp = export.build_parser(build_parser()).parse_args([])
    assert exp.listen == "127.0.0.1:9464"  # export serves by default, loopback
    assert record._record_parser().parse_args(["f"]).listen is None  # record only when asked
