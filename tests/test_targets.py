"""Target string parsing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmtop.errors import ConfigError
from llmtop.targets import make_target, parse_target
from llmtop.urls import netloc

CASES = [
    # spec, name, base_url, engine, metrics_path, host, port
    ("127.0.0.1:8000", "127.0.0.1:8000", "http://127.0.0.1:8000", None, None, "127.0.0.1", 8000),
    ("localhost:30000", "localhost:30000", "http://localhost:30000", None, None, "localhost",
     30000),
    (":8002", "127.0.0.1:8002", "http://127.0.0.1:8002", None, None, "127.0.0.1", 8002),
    ("http://gpu1:8000", "gpu1:8000", "http://gpu1:8000", None, None, "gpu1", 8000),
    ("https://gpu1:8443/metrics", "gpu1:8443", "https://gpu1:8443", None, "/metrics", "gpu1", 8443),
    ("https://gpu1", "gpu1:443", "https://gpu1:443", None, None, "gpu1", 443),
    ("http://gpu1/", "gpu1:80", "http://gpu1:80", None, None, "gpu1", 80),
    ("[::1]:8000", "[::1]:8000", "http://[::1]:8000", None, None, "::1", 8000),
    ("http://[::1]:9400/metrics", "[::1]:9400", "http://[::1]:9400", None, "/metrics", "::1", 9400),
    ("vllm@127.0.0.1:8000", "vllm@127.0.0.1:8000", "http://127.0.0.1:8000", "vllm", None,
     "127.0.0.1", 8000),
    ("vllm@http://h:8000/metrics", "vllm@h:8000", "http://h:8000", "vllm", "/metrics", "h", 8000),
    ("VLLM@h:8000", "vllm@h:8000", "http://h:8000", "vllm", None, "h", 8000),
    ("trtllm@h:8000/prometheus/metrics", "trtllm@h:8000", "http://h:8000", "trtllm",
     "/prometheus/metrics", "h", 8000),
    ("ollama@h", "ollama@h:11434", "http://h:11434", "ollama", None, "h", 11434),
    ("triton@[::1]", "triton@[::1]:8002", "http://[::1]:8002", "triton", None, "::1", 8002),
    ("h:8080/metrics?model=a", "h:8080", "http://h:8080", None, "/metrics?model=a", "h", 8080),
    ("  h:1  ", "h:1", "http://h:1", None, None, "h", 1),
]


@pytest.mark.parametrize(("spec", "name", "base", "engine", "path", "host", "port"), CASES)
def test_parse_table(spec, name, base, engine, path, host, port):
    t = parse_target(spec)
    assert (t.name, t.base_url, t.engine, t.metrics_path, t.host, t.port) == (
        name, base, engine, path, host, port,
    )
    assert t.timeout_s == 2.0 and t.verify_tls is True and t.api_key is None


def test_options_passed_through():
    t = parse_target("h:1", timeout_s=0.5, verify_tls=False)
    assert t.timeout_s == 0.5 and t.verify_tls is False


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("foo@h:8000", "unknown engine 'foo'"),
        ("h", "needs a port"),
        ("h:99999", "port"),
        ("h:abc", "port"),
        ("ftp://h:21", "scheme"),
        ("vllm@", "no host"),
        ("h :1", "whitespace"),
    ],
)
def test_errors_are_config_errors(spec, needle):
    with pytest.raises(ConfigError) as ei:
        parse_target(spec)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg


def test_unknown_engine_lists_engines():
    with pytest.raises(ConfigError, match="vllm, sglang"):
        parse_target("vlm@h:8000")


def test_credentials_in_url_refused_without_echo():
    with pytest.raises(ConfigError) as ei:
        parse_target("http://user:s3cret@h:8000")
    assert "s3cret" not in str(ei.value)


def test_make_target_and_hostport():
    t = make_target("::1", 8000, engine="sglang")
    assert t.name == "sglang@[::1]:8000" and t.base_url == "http://[::1]:8000"
    assert netloc("h", None) == "h"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_text_gives_a_target_or_a_config_error(spec):
    try:
        t = parse_target(spec)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert t.port is not None and 0 < t.port < 65536 and t.host
        assert t.base_url.startswith(("http://", "https://"))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["127.0.0.1", "localhost", "gpu-1.example", "::1", "10.0.0.5"]),
    st.integers(1, 65535),
    st.sampled_from([None, "vllm", "sglang", "triton", "dcgm"]),
    st.sampled_from(["", "/metrics", "/prometheus/metrics"]),
)
def test_roundtrip_parts(host, port, engine, path):
    hp = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    spec = (f"{engine}@" if engine else "") + hp + path
    t = parse_target(spec)
    assert (t.host, t.port, t.engine) == (host, port, engine)
    assert t.metrics_path == (path or None)
    assert t.name == (f"{engine}@{hp}" if engine else hp)


def test_router_hints_and_default_ports():
    t = parse_target("vllm-router@127.0.0.1")
    assert (t.engine, t.port, t.name) == ("vllm-router", 29000, "vllm-router@127.0.0.1:29000")
    assert parse_target("litellm@10.0.0.2").port == 4000
