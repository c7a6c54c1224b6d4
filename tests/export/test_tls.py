"""``--listen-tls-cert``: the exporter over HTTPS, checked with httpx and scraped by a real
Prometheus (certificate verified, bearer token sent); plain HTTP and a stalled handshake do
not stop it serving others."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import httpx
import pytest

from llmtop.demo.fleet import start_prometheus
from llmtop.errors import ConfigError
from llmtop.export.server import MetricsServer
from llmtop.export.state import ExportState
from llmtop.model import EngineRow, Snapshot
from tests.export.conftest import need_binary


def _trust(crt: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(crt))


def _state() -> ExportState:
    state = ExportState("direct")
    state.update(Snapshot(time=1.8e9, window_s=10.0,
                          engines=[EngineRow(key="t|m", target="t", engine="vllm", model="m",
                                             running=3.0)]), [])
    return state


def test_https_serves_and_plain_http_gets_nothing(cert):
    crt, key = cert
    srv = MetricsServer(_state().render, "127.0.0.1:0", tls_cert=str(crt), tls_key=str(key))
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        r = httpx.get(srv.url, verify=_trust(crt), timeout=5)
        assert r.status_code == 200 and 'llmtop_engine_running{engine="vllm"' in r.text
        with pytest.raises(httpx.HTTPError):  # not trusted: refused by default
            httpx.get(srv.url, timeout=5)
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port: closed
            httpx.get(srv.url.replace("https://", "http://"), timeout=5)
        stalled = socket.create_connection((srv.host, srv.port))  # never says hello
        try:
            t0 = time.monotonic()
            assert httpx.get(srv.url, verify=_trust(crt), timeout=5).status_code == 200
            assert time.monotonic() - t0 < 5
        finally:
            stalled.close()
    finally:
        srv.close()


def test_bad_certificate_or_key_is_a_clear_error(cert, tmp_path):
    crt, _key = cert
    with pytest.raises(ConfigError, match=r"--listen-tls-cert .*cannot load"):
        MetricsServer(lambda: b"", "127.0.0.1:0", tls_cert=str(tmp_path / "missing.crt"))
    with pytest.raises(ConfigError, match="cannot load"):  # no key in the certificate file
        MetricsServer(lambda: b"", "127.0.0.1:0", tls_cert=str(crt))
    with pytest.raises(ConfigError, match="--listen-tls-key needs --listen-tls-cert"):
        MetricsServer(lambda: b"", "127.0.0.1:0", tls_key=str(crt))


@pytest.mark.ci_step  # a real Prometheus
def test_prometheus_scrapes_it_over_https_with_a_token(cert, tmp_path):
    need_binary("prometheus")
    crt, key = cert
    tok = tmp_path / "token"
    tok.write_text("tls-test-token\n")
    srv = MetricsServer(_state().render, "127.0.0.1:0", token_file=str(tok),
                        tls_cert=str(crt), tls_key=str(key))
    prom = None
    try:
        prom = start_prometheus({
            "global": {"scrape_interval": "1s"},
            "scrape_configs": [{
                "job_name": "llmtop", "scheme": "https",
                "tls_config": {"ca_file": str(crt)},
                "authorization": {"credentials_file": str(tok)},
                "static_configs": [{"targets": [f"127.0.0.1:{srv.port}"]}]}],
        }, str(tmp_path / "prom"))
        deadline = time.monotonic() + 30
        got: list = []
        while time.monotonic() < deadline and not got:
            body = httpx.get(prom.url + "/api/v1/query",
                             params={"query": "llmtop_engine_running"}, timeout=5).json()
            got = body["data"]["result"]
            time.sleep(0.5)
        assert got and got[0]["value"][1] == "3"
        up = httpx.get(prom.url + "/api/v1/query", params={"query": "up"}, timeout=5).json()
        assert [s["value"][1] for s in up["data"]["result"]] == ["1"]
    finally:
        if prom is not None:
            prom.stop()
        srv.close()


def test_the_export_command_takes_the_tls_options(cert, exporter_factory):
    crt, key = cert
    exp = exporter_factory(["--demo", "--interval", "1", "--listen-tls-cert", str(crt),
                            "--listen-tls-key", str(key)])
    assert exp.url.startswith("https://127.0.0.1:")
    deadline = time.monotonic() + 20
    text = ""
    while time.monotonic() < deadline and "llmtop_engine_running" not in text:
        text = httpx.get(exp.url, verify=_trust(crt), timeout=5).text
        time.sleep(0.5)
    assert "llmtop_engine_running" in text
