"""llmtop/urls.py: a URL's scheme, host and port, read one way everywhere."""

from __future__ import annotations

import pytest

from llmtop.urls import default_port, host_port, split_url


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
