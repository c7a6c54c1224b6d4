"""llmtop/urls.py: a URL's scheme, host and port, read one way everywhere."""

from __future__ import annotations

import pytest

from llmtop.urls import (
    default_port,
    host_port,
    is_local_peer,
    is_loopback,
    is_this_machine,
    netloc,
    split_url,
)


@pytest.mark.parametrize(("url", "want"), [
    ("http://127.0.0.1:8000/metrics", ("127.0.0.1", 8000)),
    ("127.0.0.1:8000", ("127.0.0.1", 8000)),
    ("https://Engine.Example:9443", ("engine.example", 9443)),
    ("https://engine.example/v1", ("engine.example", 443)),
    ("engine.example", ("engine.example", 80)),
    ("http://[::1]:8000", ("::1", 8000)),
    ("  http://127.0.0.1:8000  ", ("127.0.0.1", 8000)),
])
def test_host_and_port_with_the_schemes_default(url, want):
    assert host_port(url) == want


@pytest.mark.parametrize("url", ["http://127.0.0.1:notaport", "http://127.0.0.1:99999",
                                 "http://", "http://:8000", ""])
def test_unreadable_is_none_never_raised(url):
    assert host_port(url) is None and split_url(url) is None


def test_split_keeps_what_was_written():
    assert split_url("https://h:1/x") == ("https", "h", 1)
    assert split_url("h") == ("http", "h", None)
    assert (default_port("https"), default_port("http")) == (443, 80)


def test_netloc_brackets_ipv6_only():
    assert netloc("::1", 8000) == "[::1]:8000"
    assert netloc("[::1]", 8000) == "[::1]:8000"
    assert netloc("engine.example", 443) == "engine.example:443"
    assert netloc("fe80::1") == "[fe80::1]" and netloc("h") == "h"


@pytest.mark.parametrize("host", ["localhost", "LocalHost", "api.localhost", "127.0.0.1",
                                  "127.3.2.1", "::1", "[::1]", "0:0:0:0:0:0:0:1"])
def test_loopback(host):
    assert is_loopback(host) and is_local_peer(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.com",
                                  "127.example.com", "localhost.example.com", "", "::2"])
def test_not_loopback(host):
    assert not is_loopback(host)


def test_a_peer_without_an_address_is_local_an_unknown_one_is_not():
    # A client on a Unix socket has an empty address; None means the address is not known.
    assert is_local_peer("") and not is_loopback("")
    assert not is_local_peer(None)
    assert not is_local_peer("10.0.0.1")


@pytest.mark.parametrize(("host", "here"), [
    ("127.0.0.1", True), ("localhost", True), ("[::1]", True), ("0.0.0.0", True), ("::", True),
    ("[::]", True), ("ip6-localhost", True), ("Localhost.LocalDomain", True),
    ("10.0.0.1", False), ("gpu-node-7", False), ("", False),
])
def test_this_machine_adds_the_wildcards_and_the_hosts_files_names(host, here):
    assert is_this_machine(host) is here
    assert not is_loopback("0.0.0.0") and not is_local_peer("::")  # never for a policy
