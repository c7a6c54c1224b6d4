"""cli/otlp.py: --otlp-listen's policy (loopback by default, a token off it) and wiring."""

from __future__ import annotations

import argparse

import pytest

from llmtop.cli.otlp import add_otlp_options, start_receiver
from llmtop.errors import ConfigError


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_otlp_options(p)
    return p.parse_args(list(argv))


def test_off_unless_asked():
    assert start_receiver(_args()) is None


def test_off_loopback_needs_a_token_or_no_auth(tmp_path):
    with pytest.raises(ConfigError, match="not a loopback address"):
        start_receiver(_args("--otlp-listen", "0.0.0.0:0"))
    with pytest.raises(ConfigError, match="not a loopback address"):
        start_receiver(_args("--otlp-grpc-listen", "0.0.0.0:0"))
    with pytest.raises(ConfigError, match="needs --otlp-tls-cert"):
        start_receiver(_args("--otlp-listen", "127.0.0.1:0", "--otlp-tls-key", "k.pem"))
    tok = tmp_path / "t"
    tok.write_text("x")
    rx = start_receiver(_args("--otlp-listen", "0.0.0.0:0", "--otlp-token-file", str(tok)))
    try:
        assert rx.allows is not None and not rx.allows(None) and rx.allows("Bearer x")
    finally:
        rx.close()


def test_a_taken_port_is_a_config_error():
    rx = start_receiver(_args("--otlp-listen", "127.0.0.1:0"))
    try:
        with pytest.raises(ConfigError, match="--otlp-listen"):
            start_receiver(_args("--otlp-listen", f"127.0.0.1:{rx.port}"))
    finally:
        rx.close()


def test_the_monitor_is_built_with_the_receiver_and_closes_it():
    import asyncio

    from llmtop.config import Config
    from llmtop.monitor import Monitor

    rx = start_receiver(_args("--otlp-listen", "127.0.0.1:0"))
    mon = Monitor.from_config(Config(discover=False), receiver=rx)
    assert mon.receiver is rx
    asyncio.run(mon.aclose())
    import socket

    with pytest.raises(OSError):  # closed with the monitor: its port refuses
        socket.create_connection(("127.0.0.1", rx.port), timeout=2.0).close()
