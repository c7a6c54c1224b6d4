"""/proc socket helpers, on a fake /proc tree and on this process."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from llmtop.sources import procnet

from .helpers import fake_proc, proc_row


def test_listen_table_decodes_v4_v6_and_skips_non_listen(tmp_path):
    root = fake_proc(
        tmp_path,
        {},
        [proc_row("0100007F:1F40", "0A", 11), proc_row("00000000:7530", "0A", 12),
         proc_row("0100007F:1F41", "01", 13)],
        [proc_row("00000000000000000000000001000000:0BB8", "0A", 14),
         proc_row("00000000000000000000000000000000:2382", "0A", 15)],
    )
    tab = procnet.listen_table(root)
    assert tab[11] == procnet.ListenSocket("127.0.0.1", 8000, 11, False)
    assert tab[12].ip == "0.0.0.0" and tab[12].port == 30000
    assert 13 not in tab
    assert tab[14].ip == "::1" and tab[14].port == 3000 and tab[14].v6
    assert tab[15].ip == "::" and tab[15].port == 9090


def test_listening_sockets_maps_ports_to_pids(tmp_path):
    root = fake_proc(
        tmp_path,
        {100: (["python", "-m", "x"], [11, 99]), 101: (["child"], [11]), 102: (["y"], [12])},
        [proc_row("0100007F:1F40", "0A", 11), proc_row("00000000:7530", "0A", 12)],
    )
    assert procnet.listening_sockets(root) == {8000: {100, 101}, 30000: {102}}
    assert procnet.listening_sockets(root, pids=[102]) == {30000: {102}}
    assert procnet.ports_of_pid(100, root) == {8000}
    assert procnet.cmdline(100, root) == ["python", "-m", "x"]
    assert procnet.pids(root) == [100, 101, 102]


def test_missing_proc_returns_empty(tmp_path):
    nothing = tmp_path / "nope"
    assert procnet.listen_table(nothing) == {}
    assert procnet.listening_sockets(nothing) == {}
    assert procnet.pids(nothing) == []
    assert procnet.cmdline(1, nothing) == []
    assert procnet.socket_inodes(1, nothing) == set()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="Linux /proc only")
def test_real_proc_sees_our_own_listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        port = s.getsockname()[1]
        assert os.getpid() in procnet.listening_sockets(pids=[os.getpid()]).get(port, set())
        assert port in procnet.ports_of_pid(os.getpid())
    finally:
        s.close()
