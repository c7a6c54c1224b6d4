"""Discovery as root reads each network namespace through netlink ``sock_diag``.

- A recorded sock_diag answer (``fixtures/netns/sock_diag.hex``) is read without root.
- A namespace made by the test (root: ``ip netns add``) is read through netlink, with
  ``/proc`` closed: the engine inside is found at its namespace address, its own socket.
- The namespace switch never leaves a thread of ours in another namespace: a thread that
  cannot come back is ended, and what failed inside is said in a note.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest

from llmtop.discovery import netns, notes, sockdiag, sockets
from llmtop.discovery.search import process_candidates
from llmtop.sources import procnet
from llmtop.sources.procnet import ListenSocket
from tests.netns_helpers import engine_in_namespace, skip_reason

REPLY = Path(__file__).resolve().parent / "fixtures" / "netns" / "sock_diag.hex"


def _recorded() -> list[tuple[int, bytes]]:
    lines = REPLY.read_text().splitlines()
    assert lines[0].startswith("# source: ")
    return [(int(f), bytes.fromhex(h)) for f, h in (x.split() for x in lines[1:])]


def test_a_recorded_sock_diag_answer_is_read():
    got: list[ListenSocket] = []
    done = []
    for _family, data in _recorded():
        parsed = sockdiag.parse_reply(data)
        assert parsed is not None
        got += parsed[0]
        done.append(parsed[1])
    assert done == [False, True, False, True]  # each family's dump ends with NLMSG_DONE
    assert got == [ListenSocket("0.0.0.0", 8000, 55292, False),
                   ListenSocket("127.0.0.1", 8002, 55294, False),
                   ListenSocket("::1", 8001, 55293, True)]


def test_an_error_answer_or_a_torn_message_is_none():
    error = bytes.fromhex("24000000020000000100000000000000") + b"\0" * 20  # NLMSG_ERROR
    assert sockdiag.parse_reply(error) is None
    assert sockdiag.parse_reply(b"\x08\0\0\0" + b"\0" * 12) is None  # length below a header


def test_the_request_asks_for_listening_tcp_sockets_only():
    req = sockdiag.request(socket.AF_INET6)
    assert len(req) == 16 + 56
    assert req[16:20] == bytes([socket.AF_INET6, socket.IPPROTO_TCP, 0, 0])
    assert int.from_bytes(req[20:24], "little") == 1 << 10  # TCP_LISTEN


@pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")
def test_as_root_an_engine_in_a_namespace_is_read_through_netlink(monkeypatch):
    # /proc/<pid>/net/tcp closed: only netlink can tell the engine's socket
    monkeypatch.setattr(procnet, "listen_table_of", lambda *a, **k: None)
    with engine_in_namespace(["-m", "vllm.entrypoints.openai.api_server", "--port",
                              "8000"]) as ns:
        said: list[str] = []
        found = [c for c in process_candidates("/proc", "127.0.0.1", said)
                 if c.container is not None and c.container.netns == ns.name]
        table = sockets.diag(ns.pid, "/proc")
    assert [(c.host, c.port, c.engine, c.certain) for c in found] == [
        (ns.addr, 8000, "vllm", True)]
    assert not [n for n in said if "could not be read" in n]
    assert table is not None
    assert {(s.ip, s.port, s.v6) for s in table.values()} == {
        ("0.0.0.0", 8000, False), ("::1", 8001, True)}


def _stranding_setns(where: dict[threading.Thread, str]):
    """A ``setns`` that enters the namespace but cannot come back, per thread."""
    def fake(fd: int) -> bool:
        me = threading.current_thread()
        if where.get(me) is None:
            where[me] = "away"
            return True
        return False
    return fake


def test_a_thread_that_cannot_come_back_is_ended_and_said(monkeypatch):
    where: dict[threading.Thread, str] = {}
    monkeypatch.setattr(netns, "_setns", _stranding_setns(where))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    said: list[str] = []
    tables = sockets.read_tables({"ns": os.getpid()}, "/proc", said)
    assert where.get(threading.current_thread()) is None  # the caller never left home
    away = [t for t, w in where.items() if w == "away"]
    assert away and not any(t.is_alive() for t in away)  # the thread that did has ended
    assert tables["ns"] is not None  # read from /proc instead
    assert said == [notes.netlink_failed(1, "NamespaceError: a thread could not return to "
                                            "llmtop's own network namespace (it was ended)")]


def test_a_failure_inside_the_namespace_is_a_note(monkeypatch):
    monkeypatch.setattr(netns, "_setns", lambda fd: True)
    monkeypatch.setattr(os, "geteuid", lambda: 0)

    class NoNetlink:
        AF_NETLINK, SOCK_DGRAM = socket.AF_NETLINK, socket.SOCK_DGRAM
        socket = socket.socket

        def __getattr__(self, name):
            return getattr(socket, name)

    def refused(*a, **k):
        raise PermissionError(13, "Permission denied")

    fake = NoNetlink()
    fake.socket = refused  # type: ignore[method-assign]
    monkeypatch.setattr(netns, "socket", fake)
    said: list[str] = []
    tables = sockets.read_tables({"a": os.getpid(), "b": os.getpid()}, "/proc", said)
    assert set(tables) == {"a", "b"}
    assert said == [notes.netlink_failed(2, "NamespaceError: [Errno 13] Permission denied")]
