"""``/metrics`` over HTTP: loopback by default, a token for anything else, no secret served."""

from __future__ import annotations

import httpx
import pytest

from llmtop.errors import ConfigError
from llmtop.export.server import MetricsServer
from llmtop.export.state import ExportState
from llmtop.httpserve import parse_listen
from llmtop.model import EngineRow, Snapshot
from llmtop.urls import is_loopback


def test_parse_listen():
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("9464") == ("127.0.0.1", 9464)
    assert parse_listen(":9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)
    for bad in ("host:port", "1.2.3.4:70000", ""):
        with pytest.raises(ConfigError):
            parse_listen(bad)
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")


def test_non_loopback_needs_a_token_or_an_explicit_no_auth(tmp_path):
    with pytest.raises(ConfigError, match="--listen-token-file"):
        MetricsServer(lambda: b"", "0.0.0.0:0")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        MetricsServer(lambda: b"", "127.0.0.1:0", token_file=str(empty))
    with pytest.raises(ConfigError, match="cannot read"):
        MetricsServer(lambda: b"", "127.0.0.1:0", token_file=str(tmp_path / "nope"))


def test_token_required_and_never_served(tmp_path):
    secret = "s3cret-token-for-the-test"
    tok = tmp_path / "token"
    tok.write_text(secret + "\n")
    state = ExportState("direct")
    state.update(Snapshot(time=1.8e9, window_s=10.0,
                          engines=[EngineRow(key="t|m", target="t", engine="vllm", model="m",
                                             running=3.0)]), [])
    srv = MetricsServer(state.render, "127.0.0.1:0", token_file=str(tok))
    try:
        assert httpx.get(srv.url, timeout=5).status_code == 401
        bad = {"Authorization": "Bearer nope"}
        assert httpx.get(srv.url, headers=bad, timeout=5).status_code == 401
        good = {"Authorization": f"Bearer {secret}"}
        r = httpx.get(srv.url, headers=good, timeout=5)
        assert r.status_code == 200 and "text/plain" in r.headers["content-type"]
        assert 'llmtop_engine_running{engine="vllm",model="m",target="t"} 3.0' in r.text
        assert secret not in r.text and "process_cpu_seconds_total" in r.text
        assert r.headers.get("content-encoding") == "gzip"  # httpx asks for it, Prometheus too
        tok.write_text("rotated-token\n")  # re-read when the file changes
        import os

        os.utime(tok, (1e9, 1e9))
        assert httpx.get(srv.url, headers=good, timeout=5).status_code == 401
        rot = {"Authorization": "Bearer rotated-token"}
        assert httpx.get(srv.url, headers=rot, timeout=5).status_code == 200
        assert httpx.get(srv.url.replace("/metrics", "/x"), headers=rot,
                         timeout=5).status_code == 404
    finally:
        srv.close()


def test_absent_is_absent_never_zero():
    state = ExportState("direct", process_metrics=False)
    row = EngineRow(key="t|m", target="t", engine="llamacpp", model="m", running=1.0,
                    waiting=None, kv_cache_usage=float("nan"))
    state.update(Snapshot(time=1.8e9, window_s=10.0, engines=[row]), [])
    text = state.render().decode()
    assert "llmtop_engine_running{" in text
    for name in ("llmtop_engine_waiting", "llmtop_engine_kv_usage_ratio",
                 "llmtop_engine_ttft_seconds", "llmtop_engine_max_running"):
        assert name + "{" not in text, name
    assert "NaN" not in text
