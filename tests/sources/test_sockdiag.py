"""sock_diag's listening table equals /proc/net/tcp{,6}'s (our own namespace: no root)."""

from __future__ import annotations

import socket
import sys

import pytest

from llmtop.sources import procnet, sockdiag

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux netlink")


def test_same_sockets_as_proc_and_none_where_it_cannot():
    with socket.socket() as s4, socket.socket(socket.AF_INET6) as s6:
        s4.bind(("127.0.0.1", 0))
        s4.listen()
        s6.bind(("::1", 0))
        s6.listen()
        diag = sockdiag.listen_table()
        proc = procnet.listen_table()
        if diag is None:
            pytest.skip("no netlink sock_diag here")
        mine = {s4.getsockname()[1], s6.getsockname()[1]}
        # sockets may open or close between the two reads: compare ours, and most of the rest
        assert {(s.ip, s.port, s.v6) for s in diag.values() if s.port in mine} == {
            ("127.0.0.1", s4.getsockname()[1], False), ("::1", s6.getsockname()[1], True)}
        assert {i: s for i, s in diag.items() if s.port in mine} == {
            i: s for i, s in proc.items() if s.port in mine}
    assert sockdiag.listen_table("/nonexistent/ns/net") is None
