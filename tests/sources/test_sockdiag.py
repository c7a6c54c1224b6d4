"""sock_diag's listening table equals /proc/net/tcp{,6}'s.

Compared on what the test owns, so sockets other tests open or close meanwhile change
nothing: our own sockets by inode (any user), and a whole namespace of the test's own
(root).
"""

from __future__ import annotations

import os
import socket
import sys

import pytest

from llmtop.discovery import sockdiag
from llmtop.sources import procnet
from llmtop.sources.procnet import ListenSocket
from tests.netns_helpers import engine_in_namespace, skip_reason

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux netlink")


def test_our_sockets_are_the_same_by_netlink_and_by_proc():
    with socket.socket() as s4, socket.socket(socket.AF_INET6) as s6:
        s4.bind(("127.0.0.1", 0))
        s4.listen()
        s6.bind(("::1", 0))
        s6.listen()
        diag = sockdiag.listen_table()
        proc = procnet.listen_table()
        if diag is None:
            pytest.skip("no netlink sock_diag here")
        i4, i6 = os.fstat(s4.fileno()).st_ino, os.fstat(s6.fileno()).st_ino
        want = {i4: ListenSocket("127.0.0.1", s4.getsockname()[1], i4, False),
                i6: ListenSocket("::1", s6.getsockname()[1], i6, True)}
    assert {i: diag.get(i) for i in want} == want
    assert {i: proc.get(i) for i in want} == want


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_a_namespace_of_our_own_reads_the_same_whole_table():
    with engine_in_namespace([]) as ns:
        diag = sockdiag.listen_table(f"/proc/{ns.pid}/ns/net")
        proc = procnet.listen_table_of(ns.pid, "/proc")
    assert diag is not None and proc is not None
    assert {(s.ip, s.port, s.v6) for s in diag.values()} == {
        ("0.0.0.0", 8000, False), ("::1", 8001, True)}
    assert diag == proc


def test_none_where_it_cannot():
    assert sockdiag.listen_table("/nonexistent/ns/net") is None
